"""The README's commands: each is a valid aiayn command line, and none writes over tracked files."""

import re
import shlex
from pathlib import Path

import pytest

from aiayn.cli import parse

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [line.split(" #")[0].strip() for line in lines if line.strip().startswith("aiayn ")]


def test_the_readme_has_commands():
    assert len(readme_commands()) > 20


@pytest.mark.parametrize("command", readme_commands())
def test_every_readme_command_parses(command):
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
    for script in ("quickstart.sh", "multi30k.sh"):
        text = (ROOT / "scripts" / script).read_text()
        assert 'echo "  export AIAYN_DATA_DIR=$AIAYN_DATA_DIR' in text and ". .venv/bin/activate" in text
