"""Shared fixtures: media generated once per session from what installed packages ship."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.support import facefusion_harness as harness
from tests.support.iam.session import IamRecording
from tests.support.media import ffmpeg, write_video
from tests.support.scheduling import STACK_FILES_FIRST, FileSeconds, LongestFirstScheduling
from tests.support.suite_budget import SuiteBudget, budget_from

TIERS = ("static", "unit", "integration", "e2e")


def pytest_configure(config: pytest.Config) -> None:
    """The whole-suite guard (tests/support/suite_budget.py): a hung stack stops the run inside CI's limit."""
    budget = budget_from(os.environ)
    if budget is not None:
        config.pluginmanager.register(SuiteBudget(budget), "suite-budget")
    # Every AWS call the local stacks make, recorded into one folder and judged at the run's end
    config.pluginmanager.register(IamRecording(config), "iam-recording")
    # Each file's seconds for the next run's order, from the controlling process of a whole side-by-side run
    # (`make test`; a `-k` slice would make its files look short)
    if (
        config.getoption("dist", None) == "loadfile"
        and not hasattr(config, "workerinput")
        and not config.getoption("keyword")
    ):
        config.pluginmanager.register(FileSeconds(config), "file-seconds")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` hands out the stack files first, longest first (tests/support/scheduling.py)."""
    return LongestFirstScheduling(config, log) if config.getvalue("dist") == "loadfile" else None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput[STACK_FILES_FIRST] = node.config.getvalue("dist") == "loadfile"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test carries its tier's marker, by the folder it lives in (`-m unit`, `-m "not e2e"`)."""
    for item in items:
        tier = item.path.relative_to(Path(__file__).parent).parts[0]
        if tier not in TIERS:
            raise pytest.UsageError(f"{item.nodeid}: tests live in one of the tiers' folders {TIERS}")
        item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture(scope="session")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("media")


@pytest.fixture(scope="session")
def clip(media_dir: Path) -> Path:
    """4 s, 25 fps, 320×240, stamped frames, stereo AAC."""
    return write_video(media_dir / "clip.mp4", seconds=4, fps=25, width=320, height=240, with_stamp=True)


@pytest.fixture(scope="session")
def clip_mkv(media_dir: Path, clip: Path) -> Path:
    destination = media_dir / "clip.mkv"
    ffmpeg("-i", str(clip), "-c", "copy", "-f", "matroska", str(destination))
    return destination


@pytest.fixture
def facefusion_harness() -> None:
    """The FaceFusion harness can run here: skipped with the reason where it cannot, failed in CI."""
    harness.require()
