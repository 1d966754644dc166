"""Argos Translate packages: `aiayn export argos` writes a .argosmodel that argostranslate (PyPI)
installs and translates with exactly as aiayn does, without a network."""

import json
import os
import subprocess
import sys
import zipfile

import pytest

pytest.importorskip("argostranslate")
pytest.importorskip("spacy")

from aiayn.cli import main  # noqa: E402
from aiayn.data.corpora import load_corpus  # noqa: E402
from aiayn.interop import argos  # noqa: E402
from aiayn.tokenizer import Tokenizer  # noqa: E402
from aiayn.translation import load_translator  # noqa: E402
from tests.conftest import HANG_S  # noqa: E402

# Installs every package given, then translates the JSON list of texts on stdin into each target.
ARGOS_EACH = """
import json, sys
from pathlib import Path
from argostranslate import package, translate
for path in sys.argv[1:]:
    package.install_from_path(Path(path))
texts, out = json.load(sys.stdin), {}
for pkg in package.get_installed_packages():
    translation = translate.get_translation_from_codes(pkg.from_code, pkg.to_code)
    out[f"{pkg.from_code}-{pkg.to_code}"] = [translation.translate(text) for text in texts]
print(json.dumps(out))
"""


def argos_each(packages, texts, home) -> dict[str, list[str]]:
    """`texts` translated by argostranslate in a process of its own with each of `packages` installed,
    its data and caches in `home`, sentences split by each package's spaCy pipeline, float32 (its
    default "auto" is int8 on CPUs): {"SRC-TGT": translations}."""
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data"), "XDG_CACHE_HOME":
           str(home / "cache"), "ARGOS_CHUNK_TYPE": "SPACY", "ARGOS_COMPUTE_TYPE": "float32"}
    done = subprocess.run([sys.executable, "-c", ARGOS_EACH, *map(str, packages)], input=json.dumps(texts),
                          env=env, capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def aiayn_on(package, home, **options):
    """aiayn on a package's own model/ (a CTranslate2 export: the same engine, so the same numbers on
    any CPU; aiayn's PyTorch engine equals CTranslate2 token for token, test_ctranslate2.py), with
    Argos Translate's search settings (no rule against repetition) and `options`."""
    with zipfile.ZipFile(package) as z:
        name = z.namelist()[0].split("/")[0]
        z.extractall(home / "unpacked")
    return load_translator(home / "unpacked" / name / "model", beam_size=argos.BEAM_SIZE,
                           length_penalty=argos.LENGTH_PENALTY, no_repeat_ngram_size=0,
                           compute_type="float32", **options)


@pytest.fixture(scope="module", params=["aiayn", "marian"])
def package(trained_run, tmp_path_factory, request):
    """The package of `trained_run`, or of the Marian directory it converts to (one vocabulary, its
    own ids): the path from an OPUS-MT-format model to LibreTranslate."""
    model, out = trained_run, tmp_path_factory.mktemp("argos") / "en_de.argosmodel"
    if request.param == "marian":
        pytest.importorskip("transformers")
        model = out.parent / "marian"
        assert main(["convert", "to-marian", str(trained_run), str(model)]) == 0
    assert main(["export", "argos", str(model), str(out)]) == 0
    return out


def test_argostranslate_installs_the_package_and_translates_100_sentences_as_aiayn(package, tmp_path):
    sources = load_corpus("synthetic:reverse:val", "", "").source[:100]
    theirs = argos_each([package], sources, tmp_path)["en-de"]
    assert theirs == [t.text for t in aiayn_on(package, tmp_path).translate(sources)]
    assert sum(out == " ".join(reversed(s.split())) for s, out in zip(sources, theirs, strict=True)) >= 80
    installed = list((tmp_path / "data" / "argos-translate" / "packages").iterdir())
    assert [p.name for p in installed] == ["translate-en_de-1_0"]


def test_the_package_holds_what_argostranslate_reads(package, trained_run):
    with zipfile.ZipFile(package) as z:
        names = z.namelist()
        assert {n.split("/")[0] for n in names} == {"translate-en_de-1_0"}
        metadata = json.loads(z.read("translate-en_de-1_0/metadata.json"))
        tokenizer = z.read("translate-en_de-1_0/sentencepiece.model")
    assert {"translate-en_de-1_0/model/model.bin", "translate-en_de-1_0/spacy/config.cfg",
            "translate-en_de-1_0/README.md"} <= set(names)
    assert metadata == {
        "package_version": "1.0", "argos_version": "1.0", "type": "translate", "from_code": "en",
        "from_name": "English", "to_code": "de", "to_name": "German", "links": []}
    assert Tokenizer(tokenizer) == Tokenizer.load(trained_run / "checkpoints" / "step_00000600")


def test_export_refuses_other_files_and_names_in_one_line(trained_run, tmp_path, capsys):
    notes = tmp_path / "notes.argosmodel"
    notes.write_text("mine")
    assert main(["export", "argos", str(trained_run), str(notes)]) == 2
    assert "exists and is not an Argos Translate package" in capsys.readouterr().err
    assert notes.read_text() == "mine"
    assert main(["export", "argos", str(trained_run), str(tmp_path / "en_de.zip")]) == 2
    assert "name ends in .argosmodel" in capsys.readouterr().err
    assert not (tmp_path / "en_de.zip").exists()
    assert main(["export", "argos", str(trained_run), str(notes), "--force"]) == 0
    assert argos.is_package(notes)


def test_a_multilingual_model_exports_one_package_per_direction_that_argos_translates_as_aiayn(
        data_dir, tmp_path):
    """--language-token target: each package is the whole model with its direction's piece as the
    target prefix, which Argos Translate gives CTranslate2 to start the decoder with."""
    from tests.conftest import multiway_files

    corpus, run, out = str(multiway_files(tmp_path / "valid")), tmp_path / "run", tmp_path / "packages"
    assert main(["train", "--preset", "tiny", "--vocab-size", "700", "--batch-tokens", "1024",
                 "--threads", "1", "--train", corpus, "--valid", corpus, "--pairs", "en-de,en-cs",
                 "--language-token", "target", "--max-steps", "2", "--save-every", "0",
                 "--out", str(run)]) == 0
    assert main(["export", "argos", str(run), str(out)]) == 0
    packages = sorted(out.iterdir())
    assert [p.name for p in packages] == ["en_cs.argosmodel", "en_de.argosmodel"]
    with zipfile.ZipFile(packages[0]) as z:
        assert json.loads(z.read("translate-en_cs-1_0/metadata.json"))["target_prefix"] == ">>cs<<"
    sources = load_corpus(corpus, "en", "de").source[:10]
    theirs = argos_each(packages, sources, tmp_path)
    for tgt, package in zip(("cs", "de"), packages, strict=True):
        ours = aiayn_on(package, tmp_path, tgt_lang=tgt, max_output_len=256)  # CTranslate2's
        assert (ours.pairs, ours.start) == ((f"en-{tgt}",), ours.tokenizer.language_id(tgt))
        assert theirs[f"en-{tgt}"] == [t.text for t in ours.translate(sources)]


def test_a_model_with_a_vocabulary_per_language_exports_and_argos_translates_it_as_aiayn(separate_model,
                                                                                         tmp_path):
    model, tokenizer, sources = separate_model
    package = argos.export(model, tokenizer, tmp_path / "en_de.argosmodel", ("en", "de"))
    theirs = argos_each([package], sources[:50], tmp_path)["en-de"]
    assert theirs == [t.text for t in aiayn_on(package, tmp_path, max_output_len=256).translate(sources[:50])]
    assert any(theirs)  # pieces of the target's own vocabulary, joined by the source's model


CHINESE = "我们你他她是的去公园散步吃饭喝水好不大小天今明年人中国学生老师书看"


def test_english_chinese_packages_install_and_translate_as_aiayn(tmp_path):
    """en->zh and zh->en, each with a vocabulary per language: Chinese text (no spaces, characters the
    source side never has) through Argos Translate's spaCy sentences and pieces, as aiayn gives it."""
    import random

    rng = random.Random(1)
    words = ["".join(rng.choices(CHINESE, k=rng.randint(1, 3))) for _ in range(60)]
    latin = {w: "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=4)) for w in words}
    pairs = [[rng.choice(words) for _ in range(rng.randint(2, 6))] for _ in range(400)]
    texts = {"en": [" ".join(latin[w] for w in p) for p in pairs], "zh": ["".join(p) + "。" for p in pairs]}
    for lang, lines in texts.items():
        (tmp_path / f"c.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    packages = []
    for src, tgt in (("en", "zh"), ("zh", "en")):
        run = tmp_path / f"{src}{tgt}"
        assert main(["train", "--preset", "tiny", "--train", str(tmp_path / "c"), "--src-lang", src,
                     "--tgt-lang", tgt, "--vocabulary", "separate", "--no-share-embeddings",
                     "--vocab-size", "400", "--max-steps", "30", "--batch-tokens", "1024", "--valid-every",
                     "0", "--bleu-every", "0", "--threads", "1", "--out", str(run)]) == 0
        packages.append(tmp_path / f"{src}_{tgt}.argosmodel")
        assert main(["export", "argos", str(run), str(packages[-1])]) == 0
    for package in packages:
        with zipfile.ZipFile(package) as z:
            assert json.loads(z.read(f"{z.namelist()[0].split('/')[0]}/metadata.json"))["to_name"] in (
                "Chinese", "English")
    for package, (src, tgt) in zip(packages, (("en", "zh"), ("zh", "en")), strict=True):
        theirs = argos_each([package], texts[src][:20], tmp_path / src)[f"{src}-{tgt}"]
        ours = aiayn_on(package, tmp_path / src, max_output_len=256)
        assert theirs == [t.text for t in ours.translate(texts[src][:20])]
