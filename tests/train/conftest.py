import pytest

from aiayn.data.batching import tokenize
from aiayn.data.corpora import load_corpus
from aiayn.tokenizer import Tokenizer


@pytest.fixture(scope="session")
def copy_task():
    """(tokenizer, train, valid) of the synthetic copy task, tokenised."""
    train, valid = load_corpus("synthetic:copy", "", ""), load_corpus("synthetic:copy:val", "", "")
    tokenizer = Tokenizer.train(train.source + train.target, 512)
    return tokenizer, tokenize(train, tokenizer), tokenize(valid, tokenizer)
