"""A multilingual model served: every direction it was trained on is a language pair of the server,
all answered by the one model in memory."""

import httpx

from aiayn.cli import main
from aiayn.serve.service import by_pair
from aiayn.translation import load_translator
from tests.conftest import multiway_files
from tests.serve.conftest import serving


def test_one_multilingual_model_answers_each_of_its_directions(data_dir, tmp_path):
    prefix = multiway_files(tmp_path / "train", n=40)
    run = tmp_path / "run"
    assert main(["train", "--preset", "tiny", "--vocab-size", "600", "--train", str(prefix), "--valid", "",
                 "--pairs", "en-de,de-en,en-cs", "--max-steps", "1", "--threads", "1",
                 "--out", str(run)]) == 0
    translator = load_translator(run, device="cpu", max_output_len=4)
    models = by_pair([translator])
    assert set(models) == {("en", "de"), ("de", "en"), ("en", "cs")}
    assert {id(t.model) for t in models.values()} == {id(translator.model)}  # one model in memory
    with serving([translator]) as url:
        languages = {entry["code"]: set(entry["targets"]) for entry in httpx.get(f"{url}/languages").json()}
        assert languages == {"en": {"de", "cs"}, "de": {"en"}}
        for source, target in models:
            body = {"q": "Ein Hund.", "source": source, "target": target}
            answer = httpx.post(f"{url}/translate", json=body)
            assert answer.status_code == 200 and isinstance(answer.json()["translatedText"], str)
        missing = httpx.post(f"{url}/translate", json={"q": "A dog.", "source": "cs", "target": "de"})
        assert missing.status_code == 400
