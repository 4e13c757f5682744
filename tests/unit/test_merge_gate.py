"""The merge gate on in-memory storage: every planned segment has a successful record, or the job fails
naming each one that has not."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusionfleet import layout
from fusionfleet.errors import SegmentFailed
from fusionfleet.jobs.loss import is_job_failed, job_failed
from fusionfleet.messages import JobContext, MergeTask, SegmentRecord
from gpu_worker.delivery.keeper import KeepPolicy
from gpu_worker.delivery.loop import Worker
from gpu_worker.delivery.retry import RetryPolicy
from gpu_worker.delivery.tasks import MergeHandler
from gpu_worker.lifecycle.stopping import StopSignal
from gpu_worker.merging.merge import MergeDeps, gate, load_plan, merge_job
from tests.support.fakes import FakeOrchestrator, FakeQueue, FakeStorage
from tests.support.jobs import WORK, halves, job_context


@pytest.fixture
def storage() -> FakeStorage:
    return FakeStorage()


@pytest.fixture
def job(storage: FakeStorage) -> JobContext:
    """A two-segment job (frames 0-49 and 50-99) whose plan is in the work bucket."""
    context = job_context()
    storage.put_json(WORK, layout.plan_key(context.job_id), [segment.to_dict() for segment in halves()])
    return context


def record(storage: FakeStorage, job: JobContext, index: int, **fields: object) -> None:
    values: dict[str, object] = {"job_id": job.job_id, "index": index, "status": "succeeded", "frames": 50}
    values.update(fields)
    storage.put_json(
        WORK, layout.segment_record_key(job.job_id, index), SegmentRecord.model_validate(values).model_dump()
    )


def _gate_failure(storage: FakeStorage, job: JobContext) -> SegmentFailed:
    """The gate's failure on the job's plan (it must fail)."""
    with pytest.raises(SegmentFailed) as failure:
        gate(storage, job, load_plan(storage, job))
    return failure.value


def test_every_segment_succeeded_gives_their_records_in_plan_order(storage: FakeStorage, job: JobContext) -> None:
    # GIVEN both segments recorded as succeeded, the second first
    record(storage, job, 1, started_at=10.0, finished_at=12.0)
    record(storage, job, 0, started_at=9.0, finished_at=11.0)
    # WHEN the gate checks the plan
    records = gate(storage, job, load_plan(storage, job))
    # THEN it passes with the records in plan order
    assert [r.index for r in records] == [0, 1]


def test_a_missing_and_a_failed_segment_are_both_named_with_their_reasons(
    storage: FakeStorage, job: JobContext
) -> None:
    # GIVEN segment 0 failed after three attempts and segment 1 never wrote a record
    record(storage, job, 0, status="failed", frames=0, attempt=3, error="RuntimeError", reason="the GPU fell off")
    # WHEN the gate checks the plan
    failure = _gate_failure(storage, job)
    # THEN one failure names both segments, their frames and why
    assert failure.reason == (
        "2 of 2 segments did not render: "
        "segment 0 (frames 0-49) failed after 3 attempts: RuntimeError: the GPU fell off; "
        "segment 1 (frames 50-99): no result"
    )


def test_a_segment_with_the_wrong_frame_count_fails_the_gate(storage: FakeStorage, job: JobContext) -> None:
    record(storage, job, 0)
    record(storage, job, 1, frames=49)
    with pytest.raises(SegmentFailed, match=r"1 of 2 segments did not render: segment 1: 49 frames, planned 50"):
        gate(storage, job, load_plan(storage, job))


def test_the_merge_fails_at_the_gate_before_downloading_anything(
    storage: FakeStorage, job: JobContext, tmp_path: Path
) -> None:
    # GIVEN a job whose second segment has no record but whose first segment's video exists
    record(storage, job, 0)
    storage.put_bytes(WORK, layout.segment_key(job.job_id, 0), b"video")
    # WHEN the merge task runs
    with pytest.raises(SegmentFailed, match="segment 1 \\(frames 50-99\\): no result"):
        merge_job(MergeTask(task_token="m", job=job), MergeDeps(storage, tmp_path))
    # THEN no segment and nothing of the target was read, and nothing was written
    assert layout.segment_key(job.job_id, 0) not in storage.reads
    assert job.target.key not in storage.reads
    assert not storage.exists(job.output.bucket, job.output.key)


def test_a_failed_segment_is_named_before_the_ones_a_stopped_job_never_rendered(storage: FakeStorage) -> None:
    # GIVEN a 30-segment job stopped early (as AWS stops a Map at its first failure): segment 25 failed,
    # and no other segment left a record
    context = job_context(frame_count=300)
    plan = [
        {"index": i, "start_frame": 10 * i, "end_frame": 10 * i + 10, "start_time_us": 0, "end_time_us": 0}
        for i in range(30)
    ]
    storage.put_json(WORK, layout.plan_key(context.job_id), plan)
    record(storage, context, 25, status="failed", frames=0, attempt=3, error="EngineCrashed", reason="signal 9")
    # WHEN the gate checks the plan
    failure = _gate_failure(storage, context)
    # THEN the failed segment comes first, with its frames, attempts and cause; the rest are summed up
    assert failure.reason.startswith(
        "30 of 30 segments did not render: "
        "segment 25 (frames 250-259) failed after 3 attempts: EngineCrashed: signal 9; "
        "segment 0 (frames 0-9): no result"
    )
    assert failure.reason.endswith("; and 10 more")


def test_the_gate_reads_records_written_by_a_newer_worker_with_fields_it_does_not_know(
    storage: FakeStorage, job: JobContext
) -> None:
    # GIVEN records from render workers a rolling deploy already updated (a field this merge lacks)
    for index in (0, 1):
        values = {"job_id": job.job_id, "index": index, "status": "succeeded", "frames": 50, "a_later_field": 1.5}
        storage.put_json(WORK, layout.segment_record_key(job.job_id, index), values)
    # THEN the gate passes on what it knows
    assert [r.index for r in gate(storage, job, load_plan(storage, job))] == [0, 1]


def test_a_gate_that_fails_marks_the_job_failed_naming_the_first_failed_segment(
    storage: FakeStorage, job: JobContext
) -> None:
    # GIVEN segment 1 failed after three attempts and segment 0 never wrote a record
    record(storage, job, 1, status="failed", frames=0, attempt=3, error="RuntimeError", reason="the GPU fell off")
    # WHEN the gate checks the plan
    failure = _gate_failure(storage, job)
    # THEN the job carries its failed marker, so workers drop any of its segments still queued
    marker = job_failed(storage, WORK, job.job_id)
    assert marker is not None and is_job_failed(storage, WORK, job.job_id)
    assert (marker.segment, marker.attempts, marker.error, marker.by) == (1, 3, "SegmentFailed", "merge gate")
    assert marker.cause == failure.reason and marker.run == job.run


def test_a_gate_with_only_missing_segments_marks_the_first_missing_and_keeps_an_earlier_marker(
    storage: FakeStorage, job: JobContext
) -> None:
    # GIVEN no segment recorded anything
    with pytest.raises(SegmentFailed):
        gate(storage, job, load_plan(storage, job))
    marker = job_failed(storage, WORK, job.job_id)
    assert marker is not None and (marker.segment, marker.attempts) == (0, 0)
    # WHEN the gate fails again (a retried merge), THEN the first knower's marker stands
    record(storage, job, 0, status="failed", frames=0, attempt=2, error="E", reason="r")
    with pytest.raises(SegmentFailed):
        gate(storage, job, load_plan(storage, job))
    assert job_failed(storage, WORK, job.job_id) == marker


def test_a_gate_that_passes_marks_nothing(storage: FakeStorage, job: JobContext) -> None:
    record(storage, job, 0)
    record(storage, job, 1)
    gate(storage, job, load_plan(storage, job))
    assert not is_job_failed(storage, WORK, job.job_id)


QUEUE = "q/merge"


def merge_once(storage: FakeStorage, job: JobContext, scratch: Path) -> tuple[FakeQueue, FakeOrchestrator, str]:
    """The job's merge sent to a merge queue of 3 receives and taken once by a merge worker: the queue, the
    orchestrator and the message's id."""
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    queue.create(QUEUE, max_receive_count=3)
    message_id = queue.send(QUEUE, MergeTask(task_token="m", job=job).model_dump_json())
    subject = Worker(
        "merge-1", [QUEUE], MergeHandler(MergeDeps(storage, scratch)), queue, orchestrator,
        RetryPolicy(max_attempts=3, backoff_s=(2, 10, 60)), KeepPolicy(visibility_s=60), StopSignal(),
        idle_wait_s=0,
    )  # fmt: skip
    message = subject.take()
    assert message is not None
    subject.execute(message)
    return queue, orchestrator, message_id


def test_a_merge_whose_gate_reads_a_segment_failed_for_good_fails_its_token_at_once_with_the_cause(
    storage: FakeStorage, job: JobContext, tmp_path: Path
) -> None:
    # GIVEN a job whose segment 1 failed its last attempt (its record says so)
    record(storage, job, 0)
    record(storage, job, 1, status="failed", frames=0, attempt=3, error="EngineCrashed", reason="exit code 70")
    # WHEN the merge worker takes its merge
    queue, orchestrator, message_id = merge_once(storage, job, tmp_path)
    # THEN its first attempt fails the token with the gate's reason, and the message is gone: no retry
    # holds the job's failure back until its merge task times out (States.Timeout)
    ((kind, token, (error, cause)),) = orchestrator.reports()
    assert (kind, token, error) == ("failure", "m", "SegmentFailed")
    assert "segment 1 (frames 50-99) failed after 3 attempts: EngineCrashed: exit code 70" in cause
    assert queue.deleted == [message_id] and queue.visibility_changes == []


def test_a_merge_whose_gate_finds_only_missing_records_is_tried_again(
    storage: FakeStorage, job: JobContext, tmp_path: Path
) -> None:
    # GIVEN a job whose segment 1 has no record yet (none failed)
    record(storage, job, 0)
    # WHEN the merge worker takes its merge
    queue, orchestrator, message_id = merge_once(storage, job, tmp_path)
    # THEN the attempt is retried after the back-off, its token untouched
    assert orchestrator.reports() == [] and queue.visibility_changes == [(message_id, 2)]
