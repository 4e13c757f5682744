"""A straggler on the real local stack: the watchdog sends a backup copy of the slow segment, the other
worker's copy wins, the job ends frame-exact, the slow copy stops, and the records show both copies."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fusionfleet import layout
from tests.e2e.conftest import FAULT_ENV, ROOT, Stack, up_command
from tests.e2e.helpers import drop_job, notice_for, queues_empty, record, stamps_of, wait_until
from tests.support.media import write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

# Quick enough for a test: sweeps every 2 s, a straggler past max(6 s, 2 × the median).
QUICK_BACKUPS = ("--backups", "--watchdog-every", "2", "--backup-factor", "2", "--backup-min-age-seconds", "6")


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10 s at 25 fps: two segments of 125 frames, chunks [0, 50), [50, 100), [100, 125)."""
    return write_video(
        tmp_path_factory.mktemp("stragglers") / "clip.mp4", seconds=10, fps=25, width=320, height=240, with_stamp=True
    )


def restart_watchdog(stack: Stack, *flags: str) -> None:
    """`local up` only starts what is not running: the watchdog is stopped first to take new settings."""
    (watchdog,) = [p for p in stack.state().processes if p.name == "watchdog"]
    os.killpg(watchdog.pid, signal.SIGTERM)
    assert wait_until(lambda: not watchdog.alive(), 30)
    result = subprocess.run(
        [*up_command(stack.port, stack.state_dir, 2), *flags], env={**os.environ, **FAULT_ENV}, cwd=ROOT,
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


@pytest.fixture
def quick_backups(stack: Stack) -> Iterator[None]:
    restart_watchdog(stack, *QUICK_BACKUPS)
    try:
        yield
    finally:
        stack.set_faults([])
        restart_watchdog(stack)


def test_a_straggler_is_copied_the_backup_wins_and_the_slow_copy_stops(
    stack: Stack, clip: Path, tmp_path: Path, quick_backups: None
) -> None:
    # GIVEN two workers, and segment 1's original copy stalling 100 s at frame 60 (its backup is not slowed)
    stack.set_faults([{"job": "straggler", "segment": 1, "copy": 0, "action": "slow", "at_frame": 60, "seconds": 100}])
    inbox = stack.subscribe()
    # WHEN the job runs
    job = drop_job(stack, "straggler", clip)
    slow = stack.worker_holding(f"segment 1 of {job}: attempt 1")
    # THEN it succeeds before the stalled copy finished: the backup copy's output is the one merged
    # (below), and the stalled copy never committed. Judged by who won, not by the clock: how much
    # sooner a job ends with backups is benchmarks/stragglers.py's measurement.
    notice = notice_for(stack, inbox, job, wait_s=300)
    assert notice["status"] == "succeeded", notice
    # AND the output is frame-exact: every source frame once, at its own index, for the source's duration
    output = notice["output"]
    path = tmp_path / "out.mp4"
    stack.client("s3").download_file(output["bucket"], output["key"], str(path))
    assert stamps_of(path) == list(range(250))
    assert notice["frames"] == 250 and abs(notice["duration_s"] - 10.0) < 0.04
    # AND the backup copy, on the other worker, won: the segment record names its output, the only one
    won = record(stack, job, 1)
    assert won["copy_number"] == 1 and won["worker"] != slow and won["key"].endswith("00001.c1.mp4")
    keys = stack.client("s3").list_objects_v2(
        Bucket=stack.resources.work_bucket, Prefix=layout.segments_prefix(job) + "00001."
    )
    outputs = [item["Key"] for item in keys.get("Contents", []) if item["Key"].endswith(".mp4")]
    assert outputs == [won["key"]]
    # AND the slow copy stopped within seconds of losing, its engine killed, its message gone
    assert wait_until(lambda: "committed the segment first" in stack.worker_log(slow), 20), stack.worker_log(slow)
    assert "watchdog: segment 1 of" in (stack.state_dir / "logs" / "watchdog.log").read_text()
    assert wait_until(lambda: queues_empty(stack), 30)
    # AND `fusionfleet logs` shows both attempts: the original superseded, the backup copy succeeded
    logs = stack.cli("logs", job, "--segment", "1")
    assert logs.returncode == 0, logs.stderr
    assert "superseded" in logs.stdout and "succeeded (backup copy)" in logs.stdout, logs.stdout
    assert "copy 1 on" in logs.stdout
