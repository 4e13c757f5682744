"""Waits of the size real work brings, on the real local stack: a dead worker's segment that comes
back only after more than a minute, and a final notice the state machine cannot publish.

(A backlog of more than two minutes is in test_faults.py.) Before the task timeouts were derived
from the job, LocalStack's default of 60 s failed both jobs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from fusionfleet.adapters.orchestrator import execution_arn
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

LONG_HOLD_S = 100


def test_a_segment_redelivered_after_more_than_a_minute_still_completes_frame_exact(
    stack: Stack, stamped_clip: Path, tmp_path: Path
) -> None:
    # GIVEN one worker of our own that holds messages for 100 s, stalling segment 0 after its first chunk
    stack.up(workers=0)
    stack.set_faults(
        [{"job": "late-redelivery", "segment": 0, "attempt": 1, "action": "slow", "at_frame": 60, "seconds": 600}]
    )
    env = {**stack.worker_env("long-hold"), "FUSIONFLEET_VISIBILITY_SECONDS": str(LONG_HOLD_S)}
    with (stack.state_dir / "logs" / "long-hold.log").open("ab") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "gpu_worker", "--role", "render", "--name", "long-hold"],
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    inbox = stack.subscribe()
    job = drop_job(stack, "late-redelivery", stamped_clip)
    try:
        assert wait_until(lambda: checkpoint_exists(stack, job, 0, 0, 50), 120), stack.logs()
        # WHEN it is killed with SIGKILL and other workers are there at once
        os.killpg(worker.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        stack.up(workers=2)
        # THEN the segment comes back only when the dead worker's hold runs out, well after a minute
        segment_back = wait_until(lambda: record_attempt(stack, job) >= 2, LONG_HOLD_S + 120)
        assert segment_back, stack.logs()
        assert time.monotonic() - killed_at > 60
        # AND the job still succeeds, every source frame at its own index, resumed after the saved chunk
        notice = notice_for(stack, inbox, job, wait_s=180)
        assert notice["status"] == "succeeded", notice
        assert stamps_of(output_of(stack, notice, tmp_path)) == list(range(250))
        assert record(stack, job, 0)["resumed_from"] == 50
    finally:
        worker.kill()
        worker.wait(timeout=30)
    assert wait_until(lambda: queues_empty(stack), 60)


def record_attempt(stack: Stack, job: str) -> int:
    try:
        return int(record(stack, job, 0).get("attempt", 0))
    except ClientError:
        return 0  # no record yet


def test_a_job_whose_notice_cannot_be_published_is_told_by_the_watchdog_exactly_once(
    stack: Stack, stamped_clip: Path, tmp_path: Path
) -> None:
    # GIVEN a job that will render fine, while its notification topic is gone
    sns = stack.client("sns")
    topic = stack.resources.topic_arn
    sfn = stack.client("stepfunctions")
    stack.up(workers=0)
    # (The watchdog is held until the topic is back and subscribed: a sweep between the two would
    # publish the notice to a topic nobody reads yet, as one CI run did.)
    with stack.paused("watchdog"):
        job = drop_job(stack, "unpublished", stamped_clip)
        sns.delete_topic(TopicArn=topic)
        try:
            stack.up(workers=2)
            # WHEN the state machine's publish keeps failing until its execution fails
            arn = execution_arn(stack.resources.state_machine_arn, job)
            ended = wait_until(lambda: _status(sfn, arn) not in ("RUNNING", "MISSING"), 300, poll_s=0.3)
            assert ended, stack.logs()
        finally:
            # AND the topic comes back (same name, same ARN), with a new subscriber
            assert sns.create_topic(Name=topic.rsplit(":", 1)[-1])["TopicArn"] == topic
        inbox = stack.subscribe()
    execution = sfn.describe_execution(executionArn=arn)
    assert execution["status"] == "FAILED" and execution.get("error") != "JobFailed", execution
    # THEN the watchdog publishes the success notice the state machine had prepared: the video is there
    notice = notice_for(stack, inbox, job, wait_s=240)
    assert notice["status"] == "succeeded" and notice["notified_by"] == "watchdog", notice
    assert "without a notification" in notice["watchdog_reason"]
    assert stamps_of(output_of(stack, notice, tmp_path)) == list(range(250))
    # AND only once: later sweeps add nothing
    time.sleep(25)
    assert [n for n in stack.notifications(inbox, wait_s=3, count=10) if n.get("job_id") == job] == []


def _status(sfn: object, arn: str) -> str:
    try:
        return str(sfn.describe_execution(executionArn=arn)["status"])  # type: ignore[attr-defined]
    except Exception:
        return "MISSING"
