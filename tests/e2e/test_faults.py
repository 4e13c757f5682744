"""Faults on the real local stack: killed and stopped workers, hung, crashing and leaking engines,
poison segments, backlogs. Every job ends with exactly one correct output or a failure notice."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT, Stack
from tests.e2e.helpers import (
    checkpoint_exists,
    drop_job,
    notice_for,
    output_of,
    queues_empty,
    record,
    stamps_of,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600), pytest.mark.usefixtures("no_faults")]


def test_a_killed_worker_loses_nothing_and_its_segment_resumes_elsewhere(
    stack: Stack, stamped_clip: Path, tmp_path: Path
) -> None:
    # GIVEN segment 0's first attempt stalls at frame 60, after its first chunk was saved
    stack.set_faults(
        [{"job": "killed-worker", "segment": 0, "attempt": 1, "action": "slow", "at_frame": 60, "seconds": 120}]
    )
    inbox = stack.subscribe()
    job = drop_job(stack, "killed-worker", stamped_clip)
    holder = stack.worker_holding(f"segment 0 of {job}: attempt 1")
    assert wait_until(lambda: checkpoint_exists(stack, job, 0, 0, 50), 60)
    # WHEN that worker is killed with SIGKILL (engine process and all) and a replacement starts
    stack.kill(holder, signal.SIGKILL)
    stack.up()
    # THEN the job succeeds, with the undisturbed output: every source frame at its own index (the
    # kill → notice time is benchmarks/chaos.py's measurement, not this test's: a generous cap here)
    notice = notice_for(stack, inbox, job, wait_s=300)
    assert notice["status"] == "succeeded", notice
    assert stamps_of(output_of(stack, notice, tmp_path)) == list(range(250))
    # AND the second attempt resumed after the saved chunk instead of starting again
    segment = record(stack, job, 0)
    assert segment["attempt"] >= 2 and segment["resumed_from"] == 50 and segment["frames_rendered"] == 75
    assert wait_until(lambda: queues_empty(stack), 30)


def run_worker(stack: Stack, name: str) -> subprocess.Popen[bytes]:
    log = (stack.state_dir / "logs" / f"{name}.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "gpu_worker", "--role", "render", "--name", name],
        env=stack.worker_env(name), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


def test_sigterm_checkpoints_releases_and_exits_cleanly(stack: Stack, stamped_clip: Path, tmp_path: Path) -> None:
    # GIVEN only a worker of our own, and every first attempt stalling for 6 s at frame 60
    stack.up(workers=0)
    stack.set_faults([{"job": "drained", "attempt": 1, "action": "slow", "at_frame": 60, "seconds": 6}])
    inbox = stack.subscribe()
    first = run_worker(stack, "drain-1")
    try:
        job = drop_job(stack, "drained", stamped_clip)
        assert wait_until(lambda: "attempt 1" in stack.worker_log("drain-1") and job in stack.worker_log("drain-1"), 60)
        assert wait_until(
            lambda: checkpoint_exists(stack, job, 0, 0, 50) or checkpoint_exists(stack, job, 1, 125, 175), 60
        )
        # WHEN it gets SIGTERM (ECS scale-in, a deployment, a Spot interruption)
        first.send_signal(signal.SIGTERM)
        code = first.wait(timeout=120)
        # THEN it stops after the chunk in hand (not at the segment's end), puts the segment back, exits 0
        assert code == 0
        log = stack.worker_log("drain-1")
        assert "checkpointed before frame 100" in log or "checkpointed before frame 225" in log, log[-2000:]
        assert "released for another worker" in log
    finally:
        if first.poll() is None:
            first.kill()
    # AND the next worker resumes from the saved chunks and the job completes, frame-exact
    second = run_worker(stack, "drain-2")
    try:
        notice = notice_for(stack, inbox, job, wait_s=120)
        assert notice["status"] == "succeeded", notice
        assert stamps_of(output_of(stack, notice, tmp_path)) == list(range(250))
        resumed = [record(stack, job, index)["resumed_from"] for index in (0, 1)]
        assert 100 in resumed or 225 in resumed
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
        stack.up(workers=2)


def test_a_second_sigterm_aborts_at_once(stack: Stack, stamped_clip: Path) -> None:
    stack.up(workers=0)
    stack.set_faults([{"job": "aborted", "action": "slow", "at_frame": 10, "seconds": 300}])
    worker = run_worker(stack, "abort-1")
    try:
        job = drop_job(stack, "aborted", stamped_clip)
        # (the engine logs the fault as it starts on the segment: the 300 s stall is under way)
        started = re.compile(rf"into segment \d+ of {re.escape(job)} ")
        assert wait_until(lambda: started.search(stack.worker_log("abort-1")) is not None, 120)
        worker.send_signal(signal.SIGTERM)
        assert wait_until(lambda: "SIGTERM received: finishing" in stack.worker_log("abort-1"), 60)
        worker.send_signal(signal.SIGTERM)
        # THEN it aborts the stalled segment rather than finishing it: it exits 1 long before the
        # 300 s stall could end (a cap, not a timing goal), and releases the segment
        code = worker.wait(timeout=120)
        assert code == 1
        assert "received again: aborting" in stack.worker_log("abort-1")
        assert "released for another worker" in stack.worker_log("abort-1")
    finally:
        if worker.poll() is None:
            worker.kill()
        stack.set_faults([])
        stack.up(workers=2)


def test_a_hung_engine_is_killed_and_the_segment_retried(stack: Stack, stamped_clip: Path, tmp_path: Path) -> None:
    stack.set_faults([{"job": "hung-engine", "segment": 1, "attempt": 1, "action": "hang", "at_frame": 5}])
    inbox = stack.subscribe()
    job = drop_job(stack, "hung-engine", stamped_clip)
    notice = notice_for(stack, inbox, job, wait_s=180)
    assert notice["status"] == "succeeded", notice
    assert record(stack, job, 1)["attempt"] == 2
    holder = stack.worker_holding(f"segment 1 of {job}: no result within 45 s")
    assert holder.startswith("worker-")
    assert stamps_of(output_of(stack, notice, tmp_path)) == list(range(250))


def test_a_leaking_engine_is_recycled(stack: Stack, stamped_clip: Path) -> None:
    stack.set_faults([{"job": "leaky", "segment": 0, "attempt": 1, "action": "leak", "megabytes": 10}])
    inbox = stack.subscribe()
    job = drop_job(stack, "leaky", stamped_clip)
    notice = notice_for(stack, inbox, job, wait_s=120)
    assert notice["status"] == "succeeded", notice
    holder = stack.worker_holding(f"segment 0 of {job}: attempt 1")
    assert wait_until(lambda: "its resident memory is" in stack.worker_log(holder), 20)


def test_a_poison_segment_fails_the_job_fast_with_its_reason(stack: Stack, stamped_clip: Path) -> None:
    # GIVEN a segment whose engine crashes on every attempt
    stack.set_faults([{"job": "poison", "segment": 1, "action": "crash", "at_frame": 3}])
    inbox = stack.subscribe()
    job = drop_job(stack, "poison", stamped_clip)
    # THEN after its three attempts the job fails with a notice naming the segment and the cause (how
    # soon after the fault: benchmarks/chaos.py's fault → final notice figures; the cap is generous)
    notice = notice_for(stack, inbox, job, wait_s=300)
    assert notice["status"] == "failed"
    assert "segment 1" in notice["reason"] and "EngineCrashed" in notice["reason"], notice
    # AND it names the segment's frames and how many attempts it had
    assert re.search(r"segment 1 \(frames \d+-\d+\)[^;]* failed after 3 attempts: EngineCrashed", notice["reason"]), (
        notice
    )
    # AND nothing is left in any queue (the dead letter was consumed), the manifest is in place
    assert wait_until(lambda: queues_empty(stack), 60)
    stack.client("s3").head_object(Bucket=stack.resources.media_bucket, Key="jobs/poison.json")


def test_a_segment_that_kills_its_workers_is_failed_from_the_dead_letter_queue(
    stack: Stack, stamped_clip: Path
) -> None:
    # GIVEN a segment that takes its whole worker down on every attempt (nobody sees it fail)
    stack.set_faults([{"job": "deadly", "segment": 0, "action": "kill-worker", "at_frame": 3}])
    inbox = stack.subscribe()
    job = drop_job(stack, "deadly", stamped_clip)
    # WHEN workers keep being replaced, as ECS would
    deadline = time.monotonic() + 240
    notice = None
    while time.monotonic() < deadline and notice is None:
        stack.up()
        try:
            notice = notice_for(stack, inbox, job, wait_s=5)
        except AssertionError:
            continue
    # THEN the dead-letter consumer fails the job, saying why
    assert notice is not None and notice["status"] == "failed"
    assert "segment 0" in notice["reason"] and "worker died" in notice["reason"], notice
    stack.set_faults([])
    stack.up()
    assert wait_until(lambda: queues_empty(stack), 60)


# Long (2.5 min): `make test` shows a segment redelivered after more than a minute (test_real_size.py).
@pytest.mark.long
def test_segments_that_wait_more_than_two_minutes_in_the_queue_still_complete(
    stack: Stack, stamped_clip: Path, tmp_path: Path
) -> None:
    # GIVEN no render worker at all for over two minutes (DESIGN: heartbeats and timeouts count queue time;
    # LocalStack's default task timeout of 60 s failed this job before timeouts were derived from the job)
    stack.up(workers=0)
    inbox = stack.subscribe()
    job = drop_job(stack, "backlog", stamped_clip)
    time.sleep(130)
    # WHEN workers come back
    stack.up(workers=2)
    # THEN the tokens are still good and the job completes
    notice = notice_for(stack, inbox, job, wait_s=120)
    assert notice["status"] == "succeeded", notice
    assert stamps_of(output_of(stack, notice, tmp_path)) == list(range(250))
