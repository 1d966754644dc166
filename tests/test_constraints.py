"""Constraints and glossaries through the API and the command line, on the model that reverses
letters ("a b c" -> "c b a"): the phrases asked for appear although the model would never write them."""

import pytest

from aiayn.cli import main
from aiayn.config import ConfigError
from aiayn.text import glossary as glossaries
from aiayn.text.glossary import Glossary, GlossaryError
from aiayn.translation import load_translator


@pytest.fixture(scope="module")
def translator(trained_run):
    return load_translator(trained_run, device="cpu", beam_size=4)


def test_each_texts_phrases_appear_and_a_text_without_is_translated_as_before(translator):
    texts = ["a b c d", "e f g", "h i j k"]
    plain = translator.translate(texts)
    found = translator.translate(texts, constraints=[["z y"], [], ["x", "w v"]])
    assert "z y" in found[0].text and "x" in found[2].text.split() and "w v" in found[2].text
    assert plain[0].text == "d c b a" and "z" not in plain[0].text  # what the model prefers
    assert found[1].text == plain[1].text


def test_a_glossary_term_found_in_a_sentence_is_translated_as_it_says(translator):
    glossary = Glossary.of({"b": "q r", "g h": "s"})
    found = translator.translate(["a b c", "f g h", "b"], glossary=glossary)
    assert "q r" in found[0].text and "s" in found[1].text.split() and "q r" in found[2].text
    assert "q" not in translator.translate(["f g h"], glossary=glossary)[0].text  # no term, no constraint
    assert "q r" in translator.translate(["a b c"], glossary={"b": "q r"})[0].text  # a mapping will do


def test_a_glossary_matches_whole_words_with_its_case_the_longest_first():
    glossary = Glossary.of([("York", "Y"), ("New York", "NY"), ("cat", "Katze")])
    assert glossary.targets("From New York to York.") == ["NY", "Y"]
    assert glossary.targets("A Cat and a category.") == []
    assert glossary.targets("a cat, a cat") == ["Katze"]


def test_what_cannot_be_constrained_is_a_one_line_error(translator, tmp_path):
    with pytest.raises(ConfigError, match="text 1 has 2 sentences; constraints and prefixes apply to one"):
        translator.translate(["a b c\nd e f"], constraints=[["z"]])
    with pytest.raises(ConfigError, match=r"constraints \(a glossary\) need a search: leave --temperature"):
        translator.translate(["a b c"], constraints=[["z"]], temperature=0.8)
    bad = tmp_path / "terms.tsv"
    bad.write_text("a\tb\nno tab here\n")
    with pytest.raises(GlossaryError, match=f"{bad}:2: a glossary line is a source term TAB a target term"):
        Glossary.read(bad)


def test_the_command_line_reads_constraints_after_tabs_and_a_glossary_file(trained_run, tmp_path, capsys):
    lines = tmp_path / "in.txt"
    lines.write_text("a b c\tz y\nd e f\n")
    assert main(["translate", str(trained_run), "--input", str(lines), "--constraints"]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert "z y" in first and second == "f e d"
    terms = tmp_path / "terms.tsv"
    terms.write_text("# letters\nd\tq r\n")
    assert main(["translate", str(trained_run), "d e f", "--glossary", str(terms)]) == 0
    assert "q r" in capsys.readouterr().out
    terms.write_text("d q r\n")
    assert main(["translate", str(trained_run), "d e f", "--glossary", str(terms)]) == 2
    err = capsys.readouterr().err
    assert f"{terms}:1:" in err and len(err.strip().splitlines()) == 1


def test_a_prefix_begins_the_translation_which_goes_on_from_it(translator):
    texts = ["a b c d", "e f g"]
    found = translator.translate(texts, prefix=["z y", ""])
    prefix = translator.tokenizer.encode(["z y"], side="target")[0]
    assert found[0].tokens[:len(prefix)] == prefix and found[0].text.startswith("z y")
    assert found[1].text == translator.translate(["e f g"])[0].text  # no prefix, as before
    assert translator.translate(["a b c d"], prefix="z y")[0].tokens == found[0].tokens  # one for all


def test_alternatives_are_the_best_ways_to_go_on_after_the_prefix_each_completed(translator):
    best = translator.translate(["a b c d"], prefix="d", alternatives=3)[0]
    every = [best, *best.alternatives]
    d = translator.tokenizer.encode(["d"], side="target")[0]
    assert len(every) == 3 and all(t.tokens[:len(d)] == d for t in every)
    assert len({t.tokens[len(d)] for t in every}) == 3  # each goes on with a token of its own
    assert [t.score for t in every] == sorted((t.score for t in every), reverse=True)
    plain = translator.translate(["a b c d"], alternatives=2)[0]  # no prefix: at the first position
    assert len({plain.tokens[0], plain.alternatives[0].tokens[0]}) == 2


def test_greedy_search_and_sampling_go_on_from_a_prefix_and_give_alternatives(translator):
    """A beam of 1 (greedy) and sampling take prefixes and alternatives as beam search does (they were
    refused as constrained searches); greedy search still meets constraints."""
    d = translator.tokenizer.encode(["d"], side="target")[0]
    for options in ({"beam_size": 1}, {"temperature": 0.7, "seed": 3}):
        best = translator.translate(["a b c d"], prefix="d", alternatives=2, **options)[0]
        every = [best, *best.alternatives]
        assert len(every) == 2 and all(t.tokens[:len(d)] == d for t in every), options
        assert len({t.tokens[len(d)] for t in every}) == 2, options
        assert translator.translate(["a b c"], prefix="z y", **options)[0].text.startswith("z y"), options
    assert "z" in translator.translate(["a b c"], constraints=[["z"]], beam_size=1)[0].text.split()


def test_the_command_line_takes_a_prefix_and_alternatives(trained_run, capsys):
    assert main(["translate", str(trained_run), "a b c", "--prefix", "z", "--alternatives", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.startswith("0 ||| z") for line in lines)


def test_spans_matching_keep_come_back_as_they_are(translator):
    """Placeholders in plain text: the model reads them with the sentence and they are written back
    unchanged; a text without a match is translated as before, and line breaks stay."""
    texts = ["a {x1} b", "c d e", "f {y&z} g\nh i"]
    found = translator.translate(texts, keep=r"\{[^}]*\}")
    assert "{x1}" in found[0].text and "{y&z}" in found[2].text.split("\n")[0]
    assert found[1].text == translator.translate(["c d e"])[0].text
    assert found[2].text.count("\n") == 1 and "<" not in found[2].text and "&amp;" not in found[2].text


def test_kept_spans_and_a_glossary_together_keep_both(translator):
    """The glossary's terms the search put in stay, whatever words the kept span is aligned with."""
    glossary = {"c": "q r", "e f": "s t"}
    for text in ("a c {name} d e f", "{name} c e f b", "c e f {name}"):
        found = translator.translate([text], glossary=glossary, keep=r"\{[^}]*\}")[0].text
        assert "q r" in found and "s t" in found and "{name}" in found, (text, found)


def test_the_command_line_keeps_spans_and_refuses_a_bad_pattern_in_one_line(trained_run, tmp_path, capsys):
    assert main(["translate", str(trained_run), "a {x1} b", "--keep", r"\{[^}]*\}"]) == 0
    assert "{x1}" in capsys.readouterr().out
    out = tmp_path / "out.txt"
    assert main(["translate", str(trained_run), "a b", "--keep", "(unclosed", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--keep '(unclosed' is not a regular expression" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


TBX_BASIC = """<?xml version="1.0" encoding="UTF-8"?>
<martif type="TBX" xml:lang="en"><text><body>
  <termEntry id="c1">
    <langSet xml:lang="{src}-US"><tig><term>d</term></tig><tig><term>e  f</term></tig></langSet>
    <langSet xml:lang="xx"><tig><term>never</term></tig></langSet>
    <langSet xml:lang="{tgt}">
      <tig><term>old</term><termNote type="administrativeStatus">deprecatedTerm-admn-sts</termNote></tig>
      <tig><term>q r</term><termNote type="administrativeStatus">preferredTerm-admn-sts</termNote></tig>
    </langSet>
  </termEntry>
  <termEntry id="c2"><langSet xml:lang="{tgt}"><tig><term>s</term></tig></langSet></termEntry>
</body></text></martif>
"""

TBX_3 = """<?xml version="1.0" encoding="UTF-8"?>
<tbx style="dct" type="TBX-Basic" xml:lang="en" xmlns="urn:iso:std:iso:30042:ed-2"><text><body>
  <conceptEntry id="c1">
    <langSec xml:lang="{src}"><termSec><term>g</term></termSec></langSec>
    <langSec xml:lang="{tgt}"><termSec><term>w v</term></termSec></langSec>
  </conceptEntry>
</body></text></tbx>
"""


def test_a_tbx_termbase_gives_each_direction_its_glossary_synonyms_in_deprecated_terms_never_written(
        tmp_path):
    basic, v3 = tmp_path / "basic.tbx", tmp_path / "v3.tbx"
    basic.write_text(TBX_BASIC.format(src="en", tgt="de"))
    v3.write_text(TBX_3.format(src="en", tgt="de"))
    termbase = glossaries.read(basic)
    assert termbase.languages() == ["de", "en", "xx"]
    assert termbase.towards("en", "de").entries == (("d", "q r"), ("e f", "q r"))
    assert termbase.towards("de", "en").entries == (("old", "d"), ("q r", "d"))  # a text may use "old"
    assert glossaries.read(v3).towards("en", "de").entries == (("g", "w v"),)
    with pytest.raises(GlossaryError, match=f"{basic}: no concept has terms in both en and fr "
                                            r"\(its languages: de, en, xx\)"):
        termbase.towards("en", "fr")
    broken = tmp_path / "broken.tbx"
    broken.write_text("<martif>\n<text>\n<termEntry></text></martif>\n")
    with pytest.raises(GlossaryError, match=f"{broken}:3: not a TBX file"):
        glossaries.read(broken)


def test_the_command_line_takes_a_tbx_termbase_for_the_models_direction(translator, trained_run, tmp_path,
                                                                         capsys):
    terms = tmp_path / "terms.tbx"
    terms.write_text(TBX_BASIC.format(src=translator.src_lang, tgt=translator.tgt_lang))
    assert main(["translate", str(trained_run), "a d c", "--glossary", str(terms)]) == 0
    assert "q r" in capsys.readouterr().out
    terms.write_text(TBX_BASIC.format(src="xy", tgt="yz"))
    assert main(["translate", str(trained_run), "a d c", "--glossary", str(terms)]) == 2
    err = capsys.readouterr().err
    assert f"{terms}: no concept has terms in both" in err and len(err.strip().splitlines()) == 1
