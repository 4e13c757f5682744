"""The docs' command lines that need no stack and no AWS run as written and exit 0 (tests/support/
doc_commands.py's RUN_WITHOUT_STACK: `swap`, `estimate`), in a folder holding the media they name
(`face.jpg` Grace Hopper's portrait, the videos a short generated shot), with no AWS credentials, region
or local stack in reach; and `fusionfleet --version` and `swap --help`, which the prose names."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleetctl.samples import grace_hopper_path
from tests.support.doc_commands import PLACEHOLDER, RUN_WITHOUT_STACK, command_path, fenced_commands, inline_commands
from tests.support.media import write_video

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE = [
    (command, argv)
    for command in fenced_commands()
    if command_path(command.plain()) in RUN_WITHOUT_STACK
    for argv in command.variants()
]
# Each line once, with every place that shows it (usage.md repeats README's swap line).
LINES: dict[tuple[str, ...], list[str]] = {}
for _command, _argv in RUNNABLE:
    LINES.setdefault(tuple(_argv), []).append(_command.where)
# Values for the placeholders a usage line leaves (`--workers N`).
VALUES = {"N": "2"}
PICTURES = ("face.jpg", "alice.jpg")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The media the lines name, under those names."""
    here = tmp_path_factory.mktemp("doc-lines")
    videos = {word for _c, argv in RUNNABLE for word in argv if word.endswith((".mp4", ".mkv", ".mov"))}
    shot = write_video(here / "shot.mp4", seconds=1, fps=25, width=320, height=240)
    for name in videos - {"out.mp4"}:
        shutil.copy(shot, here / name)
    for name in PICTURES:
        shutil.copy(grace_hopper_path(), here / name)
    return here


def _env(folder: Path) -> dict[str, str]:
    """No AWS and no local stack to be found: no credentials, region, profile, endpoint or state folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FUSIONFLEET_"))}
    empty = folder / "no-stack"
    empty.mkdir(exist_ok=True)
    return {**env, "HOME": str(empty), "FUSIONFLEET_LOCAL_DIR": str(empty)}


def _run(folder: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetctl.cli", *argv], cwd=folder, env=_env(folder),
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_the_lines_are_found() -> None:
    paths = {command_path(argv) for _c, argv in RUNNABLE}
    assert paths == set(RUN_WITHOUT_STACK), paths
    assert len({command.where for command, _a in RUNNABLE}) >= 4


@pytest.mark.parametrize(
    ("where", "argv"), [(", ".join(places), list(argv)) for argv, places in LINES.items()],
    ids=[f"{places[0]}:{' '.join(argv)}" for argv, places in LINES.items()],
)  # fmt: skip
def test_a_line_that_needs_no_stack_runs_and_exits_0(folder: Path, where: str, argv: list[str]) -> None:
    given = [VALUES.get(word, word) for word in argv]
    left = [word for word in given[1:] if PLACEHOLDER.match(word)]
    assert left == [], f"{where}: no value for the placeholders {left}"
    out = folder / "out.mp4"
    out.unlink(missing_ok=True)
    result = _run(folder, given)
    assert result.returncode == 0, f"{where}: `fusionfleet {' '.join(argv)}` exit {result.returncode}:\n{result.stderr}"
    if given[0] == "swap":
        assert out.stat().st_size > 0, result.stderr
    if given[0] == "estimate":
        shown = result.stdout
        assert ('"prices"' if "--json" in given else "prices    template.yaml's defaults") in shown, shown
        assert "no stack read" in result.stderr  # nothing reached: the template's defaults, said so


@pytest.mark.parametrize("line", ["--version", "swap --help"])
def test_the_commands_the_prose_names_that_run_anywhere(folder: Path, line: str) -> None:
    named = {command.text.removeprefix("fusionfleet ") for command in inline_commands()}
    assert line in named, f"the docs no longer name `fusionfleet {line}`"
    result = _run(folder, line.split())
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("fusionfleet " if line == "--version" else "usage: fusionfleet swap"), result.stdout
