import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiayn.data import multi30k
from aiayn.tokenizer import POOLED_FROM, Tokenizer, TokenizerError


def test_special_ids_are_fixed_and_decode_skips_specials():
    tokenizer = Tokenizer.train(["the cat sat on the mat", "der Hund lief"] * 50, 300)
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id) == (0, 1, 2, 3)
    ids = tokenizer.encode(["the cat"])[0]
    assert tokenizer.decode([2, *ids, 3, 9, 9]) == "the cat"  # bos skipped, stops at eos


def test_joint_vocabulary_round_trips_multi30k_exactly(data_dir, tmp_path):
    corpus = multi30k.load("train", "en", "de")
    tokenizer = Tokenizer.train(corpus.source + corpus.target, 8000)
    assert tokenizer.vocab_size == 8000
    tokenizer.save(tmp_path)
    assert (tmp_path / "tokenizer.model").exists()
    loaded = Tokenizer.load(tmp_path)
    test = multi30k.load("test_2016_flickr", "en", "de")
    ordinary = [s for s in test.source + test.target if "  " not in s and s == s.strip()]
    assert len(ordinary) > 1990
    for sentence, ids in zip(ordinary, loaded.encode(ordinary), strict=True):
        assert loaded.decode(ids) == sentence


def test_unseen_characters_round_trip_through_byte_fallback():
    tokenizer = Tokenizer.train(["plain ascii text only"] * 50, 300)
    for text in ("Größe – 東京 🙂", "naïve café"):
        assert tokenizer.decode(tokenizer.encode([text])[0]) == text


# Text as the tokenizer promises to round-trip: any Unicode but surrogates, "\n" and "\u2581" (the
# mark SentencePiece writes spaces as: in a text it reads as a space), with no leading, trailing or
# repeated spaces (SentencePiece treats spaces as word boundaries).
plain_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\u2581"),
                     max_size=60).map(
    lambda s: " ".join(s.split(" "))).filter(lambda s: s == s.strip(" ") and "  " not in s)


@pytest.fixture(scope="module")
def trained():
    return Tokenizer.train(["the cat sat on the mat", "der Hund lief über die Straße"] * 50, 300)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plain_text)
def test_property_decode_inverts_encode(trained, text):
    ids = trained.encode([text])[0]
    assert all(0 <= i < trained.vocab_size for i in ids)
    assert trained.decode(ids) == text


def test_many_texts_at_once_are_encoded_as_each_alone(trained):
    """SentencePiece encodes a long list on threads and a short one text by text: the same ids."""
    texts = [f"the cat {i} sat on {'the ' * (i % 5)}mat über die Straße" for i in range(POOLED_FROM + 10)]
    at_once = trained.encode(texts)
    assert at_once == [trained.encode([text])[0] for text in texts]
    assert all(isinstance(i, int) for ids in at_once for i in ids)
    assert trained.encode(texts[:3]) == at_once[:3]


def test_too_small_a_vocabulary_is_a_clear_error():
    """Problem 7: `--vocab-size 1` crashed inside SentencePiece with a traceback."""
    with pytest.raises(TokenizerError, match="vocab_size=1 is too small: a tokenizer needs at least 261"):
        Tokenizer.train(["a b c"] * 10, 1)
    with pytest.raises(TokenizerError, match="vocab_size=262 is too small for this text: .* at least 301 "):
        Tokenizer.train(["".join(chr(0x4E00 + i) for i in range(40))] * 10, 262)


def test_a_file_that_is_not_a_tokenizer_is_named(tmp_path):
    (tmp_path / "tokenizer.model").write_bytes(b"")
    with pytest.raises(TokenizerError, match=f"{tmp_path / 'tokenizer.model'}: not a SentencePiece model"):
        Tokenizer.load(tmp_path)
    with pytest.raises(TokenizerError, match="no tokenizer there"):
        Tokenizer.load(tmp_path / "nothing")


def test_separate_vocabularies_have_their_own_ids_and_round_trip_through_files(tmp_path):
    english, chinese = ["the cat sat on the mat", "a dog runs"] * 50, ["猫坐在垫子上", "一只狗在跑"] * 50
    tokenizer = Tokenizer.train_separate(english, chinese, 300, 280)
    assert tokenizer.separate and (tokenizer.source_vocab_size, tokenizer.vocab_size) == (300, 280)
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id) == (0, 1, 2, 3)
    source, target = tokenizer.encode(["a dog runs"])[0], tokenizer.encode(["一只狗在跑"], "target")[0]
    assert tokenizer.pieces(source, "source") == tokenizer.source_sp.encode("a dog runs", out_type=str)
    assert tokenizer.decode(target) == "一只狗在跑"
    assert tokenizer.target_sp.id_to_piece(source[0]) != tokenizer.source_sp.id_to_piece(source[0])  # own ids
    tokenizer.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source.model", "target.model"]
    loaded = Tokenizer.load(tmp_path)
    assert loaded.separate and loaded.encode(["a dog runs"]) == [source]
    assert loaded.decode(target) == "一只狗在跑"
    joint = Tokenizer.train(english + chinese, 300)
    assert not joint.separate and joint.source_vocab_size == joint.vocab_size == 300


def test_a_multilingual_vocabulary_has_a_whole_piece_per_language_and_round_trips(tmp_path):
    texts = {"en": ["a dog runs on the beach"] * 50 + ["two cats sleep"] * 50,
             "de": ["ein hund rennt am strand"] * 40, "fr": ["un chien court sur la plage"] * 400}
    tokenizer = Tokenizer.learn_languages(texts, 300, seed=1)
    assert tokenizer.languages() == ["de", "en", "fr"]
    fr = tokenizer.language_id("fr")
    assert fr is not None and tokenizer.pieces([fr], "source") == [">>fr<<"]
    assert fr in tokenizer.encode(["un >>fr<< chien"])[0]  # one piece wherever it stands in a text
    assert tokenizer.language_id("cs") is None
    tokenizer.save(tmp_path)
    again = Tokenizer.load(tmp_path)
    assert again == tokenizer and again.language_id("fr") == fr
    assert again.decode(again.encode(["un chien court"])[0]) == "un chien court"


def test_a_multilingual_vocabulary_learns_from_as_many_sentences_of_each_language():
    """The language with 100x the text does not take the whole vocabulary: each gives as many
    sentences, so the rare language's words are learned (unbalanced, they stay in pieces)."""
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(6)) for _ in range(300)]
    common, rare = [" ".join(rng.sample(words, 5)) for _ in range(3000)], ["qqzx vvkj"] * 30
    assert len(Tokenizer.train(common + rare, 400).encode(["qqzx"])[0]) > 2
    balanced = Tokenizer.learn_languages({"xx": rare, "yy": common}, 400, seed=1)
    assert len(balanced.encode(["qqzx"])[0]) <= 2
    assert balanced.languages() == ["xx", "yy"] and Tokenizer.train(common, 400).languages() == []
