"""`local status` shows the render workers current and desired; `local up` takes the fleet's limits."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fleetctl.cli import build_parser
from fleetctl.local.paths import LocalPaths
from fleetctl.local.state import LocalState, ManagedProcess
from fleetctl.local.supervisor import LocalStack


def status(paths: LocalPaths) -> list[str]:
    return LocalStack(paths, say=lambda _line: None).status()


@pytest.fixture
def stand_in() -> Iterator[Callable[[str], int]]:
    """A live process whose command line carries `name`, as the supervisor's liveness check wants."""
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str) -> int:
        started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", name]))
        return started[-1].pid

    yield start
    for process in started:
        process.kill()
        process.wait()


def test_status_shows_the_autoscalers_current_and_desired_workers(
    tmp_path: Path, stand_in: Callable[[str], int]
) -> None:
    # GIVEN a running autoscaler (a stand-in process) and its last decision
    paths = LocalPaths(root=tmp_path, state_dir=tmp_path / "local")
    state = LocalState(port=4566, region="us-east-1", stack="fusionfleet")
    state.processes.append(ManagedProcess("autoscaler", "autoscaler-1-4", stand_in("autoscaler-1-4"), "autoscaler.log"))
    state.save(paths.state_file)
    paths.autoscaler_status.write_text(
        json.dumps({
            "current": 3, "desired": 4, "wanted": 4, "reason": "7 segments, 1 per worker", "minimum": 1, "maximum": 4,
            "backlog": {"waiting": 4, "in_flight": 3}, "stopping": [],
            "workers": [{"name": f"worker-{n}", "pid": 100 + n} for n in (1, 2, 3)],
        })
    )  # fmt: skip
    # WHEN the status is printed
    lines = status(paths)
    # THEN it says how many run and how many are wanted, and lists the autoscaled workers
    assert any("render workers: 3 current, 4 desired (autoscaled 1..4" in line for line in lines), lines
    assert sum("running (autoscaled)" in line for line in lines) == 3


def test_status_of_a_fixed_fleet(tmp_path: Path, stand_in: Callable[[str], int]) -> None:
    paths = LocalPaths(root=tmp_path, state_dir=tmp_path / "local")
    state = LocalState(port=4566, region="us-east-1", stack="fusionfleet")
    state.processes.append(ManagedProcess("worker", "worker-1", stand_in("worker-1"), "worker-1.log"))
    state.save(paths.state_file)
    assert "render workers: 1 current, 1 desired (fixed)" in status(paths)


def test_local_up_takes_minimum_and_maximum_workers() -> None:
    args = build_parser().parse_args(["local", "up", "--workers", "1", "--max-workers", "4"])
    assert (args.workers, args.max_workers, args.backlog_per_worker) == (1, 4, 1.0)
    assert build_parser().parse_args(["local", "up"]).max_workers is None
