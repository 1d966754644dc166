"""The README's commands: each is a valid aiayn command line, and none writes over tracked files."""

import json
import re
import shlex
from pathlib import Path

import pytest

from aiayn.cli import parse

ROOT = Path(__file__).resolve().parents[1]


def readme_commands(readme: str = "README.md") -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / readme).read_text(), flags=re.S)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [line.split(" #")[0].strip() for line in lines if line.strip().startswith("aiayn ")]


def test_the_readme_has_commands():
    assert len(readme_commands()) > 20


@pytest.mark.parametrize("command", readme_commands() + readme_commands("docs/zh-CN/README.md"))
def test_every_command_of_the_readme_and_the_chinese_guide_parses(command):
    args = parse(shlex.split(command)[1:])
    assert args.command == shlex.split(command)[1]


@pytest.mark.parametrize("command", readme_commands())
def test_no_readme_command_writes_into_tracked_files(command):
    """Problem 9: README commands wrote over docs/images/attention and docs/experiments."""
    words = shlex.split(command)
    tracked = {"docs", "src", "tests", "recipes", "benchmarks", "scripts"}
    for flag, value in zip(words, words[1:], strict=False):
        if flag in ("--out", "-o", "--output", "--scores"):
            assert value.split("/")[0] not in tracked, command


def test_the_scripts_tell_the_user_how_to_reach_the_data_from_their_shell():
    """Problem 9: after the quickstart, `--train multi30k` failed in the user's own shell."""
    for script in ("quickstart.sh", "recipe.sh", "multi30k-multilingual.sh"):
        text = (ROOT / "scripts" / script).read_text()
        assert 'echo "  export AIAYN_DATA_DIR=$AIAYN_DATA_DIR' in text and ". .venv/bin/activate" in text
    for script in ("multi30k.sh", "tatoeba-zh.sh"):  # they end in recipe.sh
        assert (ROOT / "scripts" / script).read_text().rstrip().endswith(". scripts/recipe.sh")


def test_the_readme_python_example_runs(trained_run, tmp_path, monkeypatch, capsys):
    """The README's Python API section, run as written on a trained model at runs/quickstart."""
    code = re.search(r"## Python API\n\n```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)[1]
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "quickstart").symlink_to(trained_run)
    (tmp_path / "runs" / "test.en").write_text("a b c\nd e f\n")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2 + 1 + 1 + 2  # two translations, the n-best list, the attention, the stream


def test_the_readme_training_example_runs(tmp_path, monkeypatch, capsys):
    """The README's Python training example, run as written on small files at data/."""
    code = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)[1]
    assert "train_model" in code
    (tmp_path / "data").mkdir()
    words = ["dog", "cat", "runs", "sleeps", "a", "the", "big", "small", "red", "blue"]
    for split, n in (("train", 400), ("valid", 20)):
        lines = [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(3 + i % 5)) for i in range(n)]
        (tmp_path / "data" / f"{split}.en").write_text("\n".join(lines) + "\n")
        (tmp_path / "data" / f"{split}.de").write_text("\n".join(line[::-1] for line in lines) + "\n")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[-2].startswith("200 runs/mine/checkpoints/step_00000200 ")
    records = [json.loads(line) for line in (tmp_path / "runs" / "mine" / "metrics.jsonl").open()]
    assert [r["step"] for r in records if r["kind"] == "valid"] == [200]  # validated on data/valid


def test_the_readme_is_a_guide_not_a_diary():
    text = (ROOT / "README.md").read_text()
    assert len(text.encode()) <= 15_500  # a guide: a short section per feature area; detail goes to docs/
    assert not re.search(r"\bat [0-9a-f]{7}\b|commit [0-9a-f]{7}", text)  # no commit hashes
