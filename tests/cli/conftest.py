import pytest

from aiayn.cli import main


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """A tiny model trained for 60 updates on reversing letters, with validation BLEU."""
    run = tmp_path_factory.mktemp("runs") / "reverse"
    code = main(["train", "--preset", "tiny", "--train", "synthetic:reverse", "--out", str(run),
                 "--max-steps", "60", "--batch-tokens", "1024", "--warmup-steps", "30", "--valid-every", "30",
                 "--save-every", "20", "--bleu-every", "30", "--bleu-beam", "2"])
    assert code == 0
    return run
