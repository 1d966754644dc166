"""`aiayn explain`: a page written, and one-line errors for what it cannot explain."""

import pytest
import torch

from aiayn import checkpoint
from aiayn.cli import main
from aiayn.config import DataConfig, TrainConfig, model_config
from aiayn.data.corpora import load_corpus
from aiayn.model import Transformer
from aiayn.tokenizer import Tokenizer

TWENTY_WORDS = ("A man in a blue shirt is riding a bicycle down the street while two dogs run behind him "
                "in the sun.")


def test_explain_writes_one_page_and_prints_the_translation(trained_run, tmp_path, capsys):
    out_dir = str(tmp_path / "x")
    assert main(["explain", str(trained_run), "a b c d e", "--out", out_dir, "--beam-size", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "e d c b a"  # trained_run reverses letters (its fixture checks this sentence, greedy)
    assert out[1].startswith(f"wrote {tmp_path / 'x' / 'index.html'}")
    assert [p.name for p in (tmp_path / "x").iterdir()] == ["index.html"]


@pytest.mark.parametrize("args, message", [
    (["no/such/model", "a b"], "no/such/model: not a model aiayn can read"),
    (["RUN", ""], "the sentence is empty"),
    (["RUN", "a " * 300], "the sentence has 300 tokens; this model takes at most"),
    (["RUN", "a b", "--beam-size", "0"], "beam_size=0 must be at least 1"),
])
def test_explain_errors_are_one_line(trained_run, tmp_path, capsys, args, message):
    args = [str(trained_run) if a == "RUN" else a for a in args]
    assert main(["explain", *args, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()  # nothing written


def test_the_page_of_a_twenty_word_sentence_with_the_small_model_is_under_2_mb(data_dir, tmp_path):
    """The page's size depends on the model's shape and the lengths, not on its training: the `small`
    preset, untrained, with the quickstart's vocabulary (8,000 pieces of Multi30k en+de), a 20-word
    sentence and 30 output tokens."""
    corpus = load_corpus("multi30k", "en", "de")
    tokenizer = Tokenizer.train(corpus.source + corpus.target, 8000)
    assert 20 <= len(tokenizer.encode([TWENTY_WORDS])[0]) <= 30
    torch.manual_seed(0)
    model = Transformer(model_config("small", vocab_size=tokenizer.vocab_size))
    run = tmp_path / "small"
    checkpoint.save(run, model, tokenizer, DataConfig(src_lang="en", tgt_lang="de"), TrainConfig())
    out = tmp_path / "page"
    assert main(["explain", str(run), TWENTY_WORDS, "--out", str(out), "--max-output-len", "30"]) == 0
    assert (out / "index.html").stat().st_size < 2_000_000
