"""The order `make test` hands its files to its processes (pytest-xdist, `--dist loadfile`): longest first.

xdist's own order sorts files by their number of tests, most first, so the end-to-end files (one to eight
tests of minutes each, and `sam build`'s two) came last, and the run ended on one process finishing a long
file while the others had nothing left. Here the files that start a local stack come first, then the rest;
within each group, the longest first (longest-processing-time first, which keeps the end of the run short).

A file's length is what it took last time on this machine (the controlling process writes each file's
seconds to pytest's cache when a run ends), else a committed measurement (file_seconds.json, if there is
one), else an estimate from its folder and number of tests: a fresh clone, as in CI, has no cache. The
stack files stay first whatever the figures say, so a process that has moved past them never needs its
stack again (tests/e2e/conftest.py takes it down then).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling

CACHE_KEY = "fusionfleet/file-seconds"
# What a worker process is told, so it knows that no stack file follows the first file that is not one.
STACK_FILES_FIRST = "fusionfleet_stack_files_first"
E2E_FOLDER = "tests/e2e/"

# Files outside tests/e2e known to take a minute or more on 2 cores (rough figures from earlier runs'
# `--durations` and CPU measurements: only their order matters); the others go by their number of tests.
KNOWN_SECONDS = {
    "tests/static/test_sam_cli.py": 120.0,
    "tests/unit/test_simulation.py": 90.0,
    "tests/integration/engines/test_facefusion_harness.py": 90.0,
    "tests/integration/engines/test_facefusion_engine.py": 60.0,
    "tests/integration/engines/test_facefusion_faces.py": 60.0,
    "tests/integration/engines/test_no_late_refusal_facefusion.py": 40.0,
    "tests/static/test_checkov.py": 30.0,
    "tests/static/test_iam_audit.py": 30.0,
}
E2E_SECONDS_PER_TEST = 60.0
SECONDS_PER_TEST = 0.2
# e2e files that start a stack of their own besides the process's shared one (its start and stop: about a
# minute of wall time on a loaded machine, more with FaceFusion's warm engines).
OWN_STACK_FILES = frozenset(
    f"tests/e2e/{name}.py"
    for name in ("test_autoscale", "test_aws_stage_deploys", "test_facefusion_farm", "test_facefusion_job_files",
                 "test_facefusion_parity")
)  # fmt: skip
OWN_STACK_SECONDS = 120.0
# Measured figures for a fresh clone, which has no cache: the integrator copies the cache's entry
# (.pytest_cache/v/fusionfleet/file-seconds) of a whole `make test` here.
MEASURED = Path(__file__).with_name("file_seconds.json")


def is_stack_file(path: str) -> bool:
    """True for a file of tests/e2e (where a local stack is started), by its node id's path."""
    return path.replace("\\", "/").startswith(E2E_FOLDER)


def estimate(path: str, tests: int, learned: Mapping[str, float]) -> float:
    """The seconds a file is expected to take: last run's, else a known figure, else by its tests. Pure."""
    if path in learned:
        return float(learned[path])
    if path in KNOWN_SECONDS:
        return KNOWN_SECONDS[path]
    if not is_stack_file(path):
        return tests * SECONDS_PER_TEST
    return tests * E2E_SECONDS_PER_TEST + (OWN_STACK_SECONDS if path in OWN_STACK_FILES else 0.0)


def measured(path: Path = MEASURED) -> dict[str, float]:
    """The committed per-file seconds of a whole run, if any (a missing or unreadable file: none)."""
    try:
        figures = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in figures.items()} if isinstance(figures, dict) else {}


def longest_first(units: Mapping[str, Mapping[str, bool]], learned: Mapping[str, float]) -> list[str]:
    """The files in the order they are handed out: stack files first, each group longest first. Pure."""

    def key(path: str) -> tuple[bool, float]:
        return (not is_stack_file(path), -estimate(path, len(units[path]), learned))

    return sorted(units, key=key)  # stable: equal files keep their collection order


class LongestFirstScheduling(LoadFileScheduling):  # type: ignore[misc]  # xdist ships no types
    """`--dist loadfile`, with the work queue in `longest_first` order."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        cache = getattr(config, "cache", None)  # absent under -p no:cacheprovider
        learned = cache.get(CACHE_KEY, {}) if cache is not None else {}
        self.learned: dict[str, float] = {**measured(), **(learned if isinstance(learned, dict) else {})}
        self.ordered = False

    def _assign_work_unit(self, node: Any) -> None:
        # The queue is filled (in xdist's order) just before the first unit is handed out: reorder it then.
        if not self.ordered:
            queue: OrderedDict[str, dict[str, bool]] = self.workqueue
            for path in longest_first(queue, self.learned):
                queue.move_to_end(path)
            self.ordered = True
        super()._assign_work_unit(node)


class FileSeconds:
    """The controlling process's plugin: each file's seconds (setup, call and teardown), into the cache."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::", 1)[0]
        self.seconds[path] = self.seconds.get(path, 0.0) + report.duration

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        cache = getattr(self.config, "cache", None)
        if cache is None or not self.seconds or exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            return  # an interrupted run's figures would make its files look short
        learned = cache.get(CACHE_KEY, {})
        merged = {**(learned if isinstance(learned, dict) else {}), **{k: round(v, 1) for k, v in self.seconds.items()}}
        cache.set(CACHE_KEY, merged)
