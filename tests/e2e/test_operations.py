"""Operating the farm on the real local stack: cancel, retry, logs, list and workers through the CLI."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from fusionfleet import layout
from fusionfleet.adapters.orchestrator import execution_arn
from tests.e2e.conftest import Stack
from tests.e2e.helpers import drop_job, notice_for, output_of, queues_empty, record, stamps_of, wait_until
from tests.support.media import write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600), pytest.mark.usefixtures("no_faults")]


@pytest.fixture(scope="module")
def long_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 s at 25 fps: eight segments, more than two workers take at once."""
    return write_video(
        tmp_path_factory.mktemp("operations-long") / "long.mp4", seconds=30, fps=25, width=160, height=120,
        with_stamp=True,
    )  # fmt: skip


def work_keys(stack: Stack, prefix: str) -> list[str]:
    s3 = stack.client("s3")
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=stack.resources.work_bucket, Prefix=prefix):
        keys.extend(item["Key"] for item in page.get("Contents", []))
    return keys


def work_json(stack: Stack, key: str) -> Any:
    return json.loads(stack.client("s3").get_object(Bucket=stack.resources.work_bucket, Key=key)["Body"].read())


def attempts_of(stack: Stack, job: str) -> list[dict[str, Any]]:
    # Attempt records only: beside them sit the segment's task, backup and winner records (backup copies).
    return [
        work_json(stack, key)
        for key in work_keys(stack, layout.segments_prefix(job))
        if layout.parse_attempt_record_key(key) is not None
    ]


def notices_within(stack: Stack, inbox: str, job: str, wait_s: float) -> list[dict[str, Any]]:
    return [notice for notice in stack.notifications(inbox, wait_s=wait_s, count=100) if notice.get("job_id") == job]


def test_a_cancelled_job_renders_nothing_more_empties_its_queues_and_ends_cancelled_with_one_notice(
    stack: Stack, long_clip: Path
) -> None:
    # GIVEN a job of eight segments whose segments render slowly: two being rendered, the rest queued
    stack.set_faults([{"job": "cancel-me", "action": "slow", "at_frame": 10, "seconds": 25}])
    inbox = stack.subscribe()
    job = drop_job(stack, "cancel-me", long_clip)
    stack.worker_holding(f"of {job}: attempt 1")
    assert wait_until(
        lambda: sum(f"of {job}: attempt 1" in stack.worker_log(p.name) for p in stack.state().by_role("worker")) >= 2,
        60,
    ), stack.logs()
    running = stack.cli("list", "--state", "RUNNING", "--limit", "100")
    assert job in running.stdout, running.stdout + running.stderr
    # WHEN an operator cancels it
    cancelled_at = time.time()
    result = stack.cli("cancel", job)
    assert result.returncode == 0, result.stderr
    assert "cancelled" in result.stdout
    # THEN its queues empty within a minute, and nothing more is rendered
    assert wait_until(lambda: queues_empty(stack), 60), stack.logs()
    # (the segments in hand are over once each has recorded its attempt as cancelled)
    assert wait_until(lambda: len([a for a in attempts_of(stack, job) if a["status"] == "cancelled"]) >= 2, 120)
    assert [key for key in work_keys(stack, layout.segments_prefix(job)) if key.endswith(".mp4")] == []
    attempts = attempts_of(stack, job)
    assert attempts and all(attempt["started_at"] < cancelled_at + 1 for attempt in attempts), attempts
    # AND the segments in hand were stopped in their 25 s stall, not left to finish it
    stopped = [attempt for attempt in attempts if attempt["status"] == "cancelled"]
    assert len(stopped) >= 2 and all(a["finished_at"] < a["started_at"] + 25 for a in stopped), attempts
    # AND the job ends CANCELLED with exactly one notice saying so (the watchdog sweeps every 10 s)
    notice = notice_for(stack, inbox, job, wait_s=30)
    assert notice["status"] == "cancelled", notice
    assert notices_within(stack, inbox, job, wait_s=25) == []
    status = stack.cli("status", job)
    assert "CANCELLED" in status.stdout and status.returncode != 0, status.stdout
    # AND the execution itself ends ABORTED (LocalStack ends a stopped one once its waiting tasks are woken)
    sfn = stack.client("stepfunctions")
    arn = execution_arn(stack.resources.state_machine_arn, job)
    assert wait_until(lambda: sfn.describe_execution(executionArn=arn)["status"] == "ABORTED", 60, poll_s=2)
    assert job in stack.cli("list", "--state", "CANCELLED", "--limit", "100").stdout
    # AND cancelling it again says it has ended and changes nothing
    again = stack.cli("cancel", job)
    assert again.returncode != 0 and "has ended" in again.stderr, again.stderr
    assert notices_within(stack, inbox, job, wait_s=3) == []


def test_a_failed_job_retried_renders_only_its_missing_segments_and_succeeds_with_one_notice(
    stack: Stack, stamped_clip: Path, tmp_path: Path
) -> None:
    # GIVEN a job whose segment 1 crashes its engine on every attempt: it fails
    stack.set_faults([{"job": "retry-me", "segment": 1, "action": "crash", "at_frame": 3}])
    inbox = stack.subscribe()
    job = drop_job(stack, "retry-me", stamped_clip)
    failed = notice_for(stack, inbox, job, wait_s=120)
    assert failed["status"] == "failed" and "segment 1" in failed["reason"], failed
    assert wait_until(lambda: queues_empty(stack), 60)
    first = record(stack, job, 0)
    assert first["status"] == "succeeded" and record(stack, job, 1)["status"] == "failed"
    # WHEN the fault is gone and the job is retried
    stack.set_faults([])
    result = stack.cli("retry", job)
    assert result.returncode == 0, result.stderr
    assert "1 of 2 segments" in result.stdout, result.stdout
    # THEN it succeeds with one notice and a frame-exact output
    notice = notice_for(stack, inbox, job, wait_s=120)
    assert notice["status"] == "succeeded", notice
    assert stamps_of(output_of(stack, notice, tmp_path)) == list(range(250))
    assert notices_within(stack, inbox, job, wait_s=25) == []
    # AND only the missing segment was rendered again: segment 0 is the first run's, untouched
    assert record(stack, job, 0) == first
    second_run = [a for a in attempts_of(stack, job) if a["run"] == 1]
    assert [(a["index"], a["status"]) for a in second_run] == [(1, "succeeded")], second_run
    # AND status, logs and list tell the story
    status = stack.cli("status", job)
    assert "SUCCEEDED" in status.stdout and "2 done" in status.stdout, status.stdout
    logs = stack.cli("logs", job, "--segment", "1")
    lines = logs.stdout.strip().splitlines()
    assert logs.returncode == 0 and len(lines) == 1 + 4, logs.stdout
    assert [line.split()[3] for line in lines[1:]] == ["failed", "failed", "failed", "succeeded"], logs.stdout
    assert "EngineCrashed" in lines[1]
    assert job in stack.cli("list", "--state", "SUCCEEDED", "--limit", "100").stdout
    # AND a succeeded job is not retried again, an unknown one is not found
    again = stack.cli("retry", job)
    assert again.returncode != 0 and "nothing to retry" in again.stderr, again.stderr
    unknown = stack.cli("logs", "no-such-job-0123456789abcdef")
    assert unknown.returncode != 0 and "no job" in unknown.stderr, unknown.stderr
    # AND the latest rendered frame is there as a small JPEG for the dashboard
    preview = stack.client("s3").get_object(Bucket=stack.resources.work_bucket, Key=layout.frame_preview_key(job))
    assert preview["Body"].read()[:2] == b"\xff\xd8"


def test_a_manifest_uploaded_again_after_its_jobs_record_expired_runs_again_and_is_told(
    stack: Stack, stamped_clip: Path, tmp_path: Path
) -> None:
    # GIVEN a job that ran to its end, whose work files then expired (the work bucket's lifecycle
    # rule; Step Functions keeps its execution's name for 90 days)
    inbox = stack.subscribe()
    job = drop_job(stack, "again", stamped_clip)
    assert notice_for(stack, inbox, job, wait_s=120)["status"] == "succeeded"
    s3 = stack.client("s3")
    for key in work_keys(stack, layout.work_prefix(job)):
        s3.delete_object(Bucket=stack.resources.work_bucket, Key=key)
    # WHEN the same manifest is uploaded again (the same bytes: the same job id)
    manifest = s3.get_object(Bucket=stack.resources.media_bucket, Key="jobs/again.json")["Body"].read()
    s3.put_object(Bucket=stack.resources.media_bucket, Key="jobs/again.json", Body=manifest)
    # THEN it renders again as the job's run 1, frame-exact, and its one notice arrives
    notice = notice_for(stack, inbox, job, wait_s=180)
    assert notice["status"] == "succeeded", notice
    assert stamps_of(output_of(stack, notice, tmp_path)) == list(range(250))
    assert work_json(stack, layout.run_key(job))["run"] == 1
    assert {a["run"] for a in attempts_of(stack, job)} == {1}
    status = stack.cli("status", job)
    assert "SUCCEEDED" in status.stdout, status.stdout
    assert notices_within(stack, inbox, job, wait_s=20) == []


def test_a_job_cancelled_with_every_segment_rendered_is_retried_with_an_empty_map_and_only_merges(
    stack: Stack, stamped_clip: Path, tmp_path: Path
) -> None:
    # GIVEN a job whose segments have all rendered while no merge worker runs, cancelled before it merged
    stack.kill("merge-1", signal.SIGKILL)
    try:
        inbox = stack.subscribe()
        job = drop_job(stack, "merge-later", stamped_clip)
        records = {layout.segment_record_key(job, i) for i in (0, 1)}
        # (attempt records appear under the same prefix as soon as a segment is taken)
        assert wait_until(lambda: records <= set(work_keys(stack, layout.segments_prefix(job))), 180), stack.logs()
        assert all(record(stack, job, i)["status"] == "succeeded" for i in (0, 1))
        first = [record(stack, job, i) for i in (0, 1)]
        cancelled = stack.cli("cancel", job)
        assert cancelled.returncode == 0, cancelled.stderr
        assert notice_for(stack, inbox, job, wait_s=60)["status"] == "cancelled"
    finally:
        stack.up()  # the merge worker comes back
    # WHEN it is retried
    result = stack.cli("retry", job)
    assert result.returncode == 0, result.stderr
    assert "all segments are valid; merging again" in result.stdout, result.stdout
    # THEN the retry's Distributed Map has nothing to render, and the job merges and succeeds once
    notice = notice_for(stack, inbox, job, wait_s=180)
    assert notice["status"] == "succeeded", notice
    assert stamps_of(output_of(stack, notice, tmp_path)) == list(range(250))
    assert [record(stack, job, i) for i in (0, 1)] == first
    assert [a for a in attempts_of(stack, job) if a["run"] == 1] == []
    assert notices_within(stack, inbox, job, wait_s=15) == []


def worker_line(stack: Stack, name: str, lost_after_s: int) -> str:
    listing = stack.cli("workers", "--lost-after", str(lost_after_s))
    assert listing.returncode == 0, listing.stderr
    found = [line for line in listing.stdout.splitlines() if line.split()[:1] == [name]]
    return found[0] if found else ""


def test_workers_shows_a_worker_killed_with_sigkill_as_lost_after_its_heartbeat_lapses(stack: Stack) -> None:
    # GIVEN the stack's workers, all beating
    stack.up(workers=2)
    assert wait_until(lambda: worker_line(stack, "worker-2", 10).endswith("alive"), 30)
    assert worker_line(stack, "merge-1", 10).split()[1] == "merge"
    # WHEN one is killed with SIGKILL (no clean exit: its record stays)
    stack.kill("worker-2", signal.SIGKILL)
    killed_at = time.monotonic()
    # THEN it is shown as lost once its heartbeat lapses, and the others stay alive
    assert wait_until(lambda: worker_line(stack, "worker-2", 10).endswith("LOST"), 40, poll_s=1)
    assert time.monotonic() - killed_at > 5
    assert worker_line(stack, "worker-1", 10).endswith("alive")
    # AND a replacement under the same name beats again
    stack.up(workers=2)
    assert wait_until(lambda: worker_line(stack, "worker-2", 10).endswith("alive"), 30)
