from aiayn.data import multi30k
from aiayn.tokenizer import Tokenizer


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
