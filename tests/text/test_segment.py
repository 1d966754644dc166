"""Cutting text into sentences and joining translations back (aiayn.text.segment)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiayn.text.segment import Parts, fit, join, split

# The hard cases: abbreviations, decimals and times, ordinals, ellipses, quotes and brackets, "?!",
# no final punctuation, French spacing, CJK full stops. Each row: language, text, its sentences.
HARD_CASES = [
    # en
    ('en', 'Dr. Smith arrived at noon. He was late.',
     ['Dr. Smith arrived at noon.', 'He was late.']),
    ('en', 'The U.S. economy grew by 2.5% last year. Prices rose.',
     ['The U.S. economy grew by 2.5% last year.', 'Prices rose.']),
    ('en', 'It costs $3.50 today. That is cheap.',
     ['It costs $3.50 today.', 'That is cheap.']),
    ('en', "We meet at 10.30 tomorrow. Don't be late.",
     ['We meet at 10.30 tomorrow.', "Don't be late."]),
    ('en', 'Wait... what happened? Nobody knows.',
     ['Wait... what happened?', 'Nobody knows.']),
    ('en', 'He said "Stop." Then he left.',
     ['He said "Stop."', 'Then he left.']),
    ('en', "Really?! I can't believe it.",
     ['Really?!', "I can't believe it."]),
    ('en', 'She left early (nobody knew why). We stayed.',
     ['She left early (nobody knew why).', 'We stayed.']),
    ('en', 'A man is riding a bicycle',
     ['A man is riding a bicycle']),
    ('en', 'People are admiring a work of art. Busy Asian mall with lanterns.',
     ['People are admiring a work of art.', 'Busy Asian mall with lanterns.']),
    ('en', 'We drove approx. Paris to Lyon in a day. Prices incl. VAT apply. Then we left.',
     ['We drove approx. Paris to Lyon in a day.', 'Prices incl. VAT apply.', 'Then we left.']),
    ('de', 'Preise inkl. MwSt. und zzgl. Versand. Wir fahren bzw. Berlin.',
     ['Preise inkl. MwSt. und zzgl. Versand.', 'Wir fahren bzw. Berlin.']),
    ('en', 'See fig. 3 and vs. Germany, etc. Then we go.',
     ['See fig. 3 and vs. Germany, etc.', 'Then we go.']),
    ('en', 'Mr. and Mrs. Jones live in St. Louis. They have two kids.',
     ['Mr. and Mrs. Jones live in St. Louis.', 'They have two kids.']),
    ('en', 'Fruit, e.g. apples, is healthy. I like it.',
     ['Fruit, e.g. apples, is healthy.', 'I like it.']),
    ('en', 'Version 2.0 came out on Jan. 5, 2020. It fixed many bugs.',
     ['Version 2.0 came out on Jan. 5, 2020.', 'It fixed many bugs.']),
    ('en', 'A dog runs. A cat sleeps. A bird sings.',
     ['A dog runs.', 'A cat sleeps.', 'A bird sings.']),
    ('en', 'Is it 5 p.m. already? Yes.',
     ['Is it 5 p.m. already?', 'Yes.']),
    # de
    ('de', 'Dr. Müller kommt heute. Er ist pünktlich.',
     ['Dr. Müller kommt heute.', 'Er ist pünktlich.']),
    ('de', 'Das ist z.B. ein Apfel. Er ist rot.',
     ['Das ist z.B. ein Apfel.', 'Er ist rot.']),
    ('de', 'Äpfel, Birnen usw. sind Obst. Ich mag sie.',
     ['Äpfel, Birnen usw. sind Obst.', 'Ich mag sie.']),
    ('de', 'Er kauft Äpfel bzw. Birnen heute. Dann geht er.',  # nouns have capitals: no cut after "bzw."
     ['Er kauft Äpfel bzw. Birnen heute.', 'Dann geht er.']),
    ('de', 'Wir treffen uns am 3. Mai in Berlin. Kommst du?',
     ['Wir treffen uns am 3. Mai in Berlin.', 'Kommst du?']),
    ('de', 'Der Preis beträgt 3,50 Euro. Das ist günstig.',
     ['Der Preis beträgt 3,50 Euro.', 'Das ist günstig.']),
    ('de', 'Es ist 10.30 Uhr. Wir gehen.',
     ['Es ist 10.30 Uhr.', 'Wir gehen.']),
    ('de', 'Er sagte: „Ich komme.“ Dann ging er.',
     ['Er sagte: „Ich komme.“', 'Dann ging er.']),
    ('de', 'Wirklich?! Das glaube ich nicht.',
     ['Wirklich?!', 'Das glaube ich nicht.']),
    ('de', 'Ein Mann fährt Fahrrad',
     ['Ein Mann fährt Fahrrad']),
    ('de', 'Das war im 19. Jahrhundert. Heute ist es anders.',
     ['Das war im 19. Jahrhundert.', 'Heute ist es anders.']),
    ('de', 'Hallo... ist da jemand? Niemand antwortet.',
     ['Hallo... ist da jemand?', 'Niemand antwortet.']),
    ('de', 'Ein Hund läuft. Eine Katze schläft. Ein Vogel singt.',
     ['Ein Hund läuft.', 'Eine Katze schläft.', 'Ein Vogel singt.']),
    ('de', 'Die Firma (gegr. 1990) wächst. Sie hat 50 Mitarbeiter.',
     ['Die Firma (gegr. 1990) wächst.', 'Sie hat 50 Mitarbeiter.']),
    # fr
    ('fr', 'M. Dupont est arrivé hier. Il était en retard.',
     ['M. Dupont est arrivé hier.', 'Il était en retard.']),
    ('fr', "Le prix est de 3,50 euros. C'est bon marché.",
     ['Le prix est de 3,50 euros.', "C'est bon marché."]),
    ('fr', 'Il est né le 1er mai 1990. Il habite à Paris.',
     ['Il est né le 1er mai 1990.', 'Il habite à Paris.']),
    ('fr', "Tu viens ? Oui, j'arrive.",
     ['Tu viens ?', "Oui, j'arrive."]),
    ('fr', 'Il a dit : « Je viens. » Puis il est parti.',
     ['Il a dit : « Je viens. »', 'Puis il est parti.']),
    ('fr', "Vraiment ?! Je n'y crois pas.",
     ['Vraiment ?!', "Je n'y crois pas."]),
    ('fr', "Les fruits, p. ex. les pommes, sont bons. J'aime les pommes.",
     ['Les fruits, p. ex. les pommes, sont bons.', "J'aime les pommes."]),
    ('fr', 'Un homme fait du vélo',
     ['Un homme fait du vélo']),
    ('fr', 'Attends... quoi ? Personne ne sait.',
     ['Attends... quoi ?', 'Personne ne sait.']),
    ('fr', 'Il est 10 h 30. Nous partons.',
     ['Il est 10 h 30.', 'Nous partons.']),
    ('fr', 'Un chien court. Un chat dort. Un oiseau chante.',
     ['Un chien court.', 'Un chat dort.', 'Un oiseau chante.']),
    ('fr', 'Mme Martin habite au 3e étage. Elle est gentille.',
     ['Mme Martin habite au 3e étage.', 'Elle est gentille.']),
    # zh
    ('zh', '我很好。你呢？我们走吧！',
     ['我很好。', '你呢？', '我们走吧！']),
    ('zh', '他问：“你好吗？”我说：“很好。”',
     ['他问：“你好吗？”', '我说：“很好。”']),
    ('zh', '他说「走吧！」我们就走了。',
     ['他说「走吧！」', '我们就走了。']),
    ('zh', '（这是括号里的话。）然后呢？',
     ['（这是括号里的话。）', '然后呢？']),
    ('zh', '你先走；我马上就来。',
     ['你先走；', '我马上就来。']),
    ('zh', '等一下……我来了。',
     ['等一下……', '我来了。']),
    ('zh', 'Tom住在New York。他用Python 3.11写代码!你呢?',
     ['Tom住在New York。', '他用Python 3.11写代码!', '你呢?']),
    ('zh', '价格是3.5元，很便宜。',
     ['价格是3.5元，很便宜。']),
    # ja
    ('ja', '今日は晴れです。明日は雨です。',
     ['今日は晴れです。', '明日は雨です。']),
]


@pytest.mark.parametrize("lang, text, sentences", HARD_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(HARD_CASES)])
def test_hard_cases_are_cut_into_their_sentences(lang, text, sentences):
    parts = split(text, lang)
    assert parts.sentences == sentences
    assert parts.text == text


def test_lines_are_kept_exactly_and_cut_on_their_own():
    parts = split("  A dog runs.  A cat sleeps.\n\nThe end. \r\n- milk\n- eggs", "en")
    assert parts.sentences == ["A dog runs.", "A cat sleeps.", "The end.", "- milk", "- eggs"]
    assert parts.spaces == ["  ", "  ", "\n\n", " \r\n", "\n", ""]
    assert join(parts, ["1", "2", "3", "4", "5"], "de") == "  1  2\n\n3 \r\n4\n5"


def test_without_sentence_splitting_a_text_is_one_sentence():
    assert split(" A b. C d.\nE f. ", "en", sentences=False) == Parts(["A b. C d.\nE f."], [" ", " "])
    assert split("  ", "en", sentences=False) == Parts([], ["  "])


@given(st.text(alphabet=st.sampled_from("ab .?!\n\t\"'(),。？；…”」M1:;"), max_size=60),
       st.sampled_from(["en", "de", "fr", "zh"]))
def test_property_the_parts_of_any_text_join_to_it(text, lang):
    for sentences in (True, False):
        parts = split(text, lang, sentences)
        assert parts.text == text
        assert len(parts.spaces) == len(parts.sentences) + 1
        assert all(s and s == s.strip() for s in parts.sentences)


def test_between_sentences_a_space_where_the_target_language_has_them():
    zh = split("我很好。你呢？", "zh")
    assert join(zh, ["I am fine.", "And you?"], "en") == "I am fine. And you?"
    en = split("I am fine. And you?", "en")
    assert join(en, ["我很好。", "你呢？"], "zh") == "我很好。你呢？"
    assert join(en, ["Mir geht es gut.", "Und dir?"], "de") == "Mir geht es gut. Und dir?"


def test_a_chinese_paragraph_is_cut_into_its_sentences_and_joined_without_spaces():
    paragraph = "今天天气很好。我们去公园散步吧！你想一起去吗？"
    parts = split(paragraph, "zh")
    assert parts.sentences == ["今天天气很好。", "我们去公园散步吧！", "你想一起去吗？"]
    assert join(parts, parts.sentences, "zh") == paragraph
    english = split("The weather is fine today. Let us walk in the park! Do you want to come?", "en")
    assert join(english, parts.sentences, "zh") == paragraph  # no space inserted between them
    assert join(parts, ["The weather is fine.", "Let us go!", "Coming?"], "en") == \
        "The weather is fine. Let us go! Coming?"


def test_a_sentence_too_long_is_cut_at_its_best_boundaries_and_nothing_is_lost():
    text = "This is a long sentence, which goes on and on; it has clauses, many of them, and never stops."
    parts = fit(split(text, "en"), lambda s: len(s.split()) <= 10)  # 19 words: cut once
    assert parts.sentences == ["This is a long sentence, which goes on and on;",  # at the semicolon,
                               "it has clauses, many of them, and never stops."]  # not a comma
    assert parts.text == text
    parts = fit(split(text, "en"), lambda s: len(s.split()) <= 4)
    assert parts.text == text and all(len(s.split()) <= 4 for s in parts.sentences)


def test_text_without_spaces_is_cut_after_its_commas_else_anywhere():
    parts = fit(split("我很好，你呢，我们走吧", "zh"), lambda s: len(s) <= 4)
    assert parts.sentences == ["我很好，", "你呢，", "我们走吧"]
    parts = fit(split("abcdefghij", "en"), lambda s: len(s) <= 3)
    assert "".join(parts.sentences) == "abcdefghij" and all(len(s) <= 3 for s in parts.sentences)


@given(st.text(alphabet=st.sampled_from("abc ,;"), max_size=80), st.integers(1, 6))
def test_property_fitting_keeps_every_character(text, most):
    parts = fit(split(text, "en"), lambda s: len(s) <= most)
    assert parts.text == text
    assert all(len(s) <= most or len(s) <= 1 for s in parts.sentences)
