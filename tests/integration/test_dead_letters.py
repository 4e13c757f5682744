"""Dead-lettered tasks fail their tokens with the reason (moto S3, recording orchestrator)."""

from __future__ import annotations

import json
from typing import Any

from fusionfleet import layout
from fusionfleet.adapters.storage import S3Storage, get_json, put_json
from fusionfleet.errors import TokenGone
from fusionfleet.jobs.loss import job_failed
from fusionfleet.messages import SegmentRecord
from fusionfleet.services.deadletter import fail_dead_letter
from tests.integration.conftest import Aws


class Tokens:
    def __init__(self, closed: bool = False) -> None:
        self.failures: list[tuple[str, str, str]] = []
        self._closed = closed

    def task_failure(self, token: str, error: str, cause: str) -> None:
        self.failures.append((token, error, cause))
        if self._closed:
            raise TokenGone("TaskTimedOut")


def body(segment: dict[str, Any] | None = None) -> str:
    task: dict[str, Any] = {"task_token": "tok", "job": {"job_id": "job-1", "work_bucket": "work"}}
    if segment is not None:
        task["segment"] = segment
    return json.dumps(task)


def test_a_segment_whose_workers_died_fails_its_job_and_is_recorded(aws: Aws) -> None:
    storage = S3Storage(aws.s3)
    tokens = Tokens()
    outcome = fail_dead_letter(body({"index": 4}), 3, storage, tokens)  # type: ignore[arg-type]
    assert outcome is not None and not outcome.already_closed
    ((token, error, cause),) = tokens.failures
    assert (token, error) == ("tok", "SegmentDeadLettered")
    assert cause == "segment 4 of job-1 was dead-lettered after 3 deliveries: its worker died each time"
    record = SegmentRecord.model_validate(get_json(storage, "work", layout.segment_record_key("job-1", 4)))
    assert record.status == "failed" and record.reason == cause


def test_the_last_recorded_error_is_the_reason(aws: Aws) -> None:
    storage = S3Storage(aws.s3)
    record = SegmentRecord(job_id="job-1", index=2, status="failed", error="EngineCrashed", reason="died (signal 9)")
    put_json(storage, "work", layout.segment_record_key("job-1", 2), record.model_dump())
    tokens = Tokens(closed=True)
    outcome = fail_dead_letter(body({"index": 2, "start_frame": 100, "end_frame": 150}), 3, storage, tokens)  # type: ignore[arg-type]
    assert outcome is not None and outcome.already_closed
    assert tokens.failures[0][2] == (
        "segment 2 (frames 100-149) of job-1 failed after 3 attempts: EngineCrashed: died (signal 9)"
    )


def test_merge_dead_letters_and_garbage(aws: Aws) -> None:
    storage = S3Storage(aws.s3)
    tokens = Tokens()
    outcome = fail_dead_letter(body(), 3, storage, tokens)  # type: ignore[arg-type]
    assert outcome is not None and tokens.failures[0][1] == "MergeDeadLettered"
    assert fail_dead_letter("not json", 1, storage, tokens) is None  # type: ignore[arg-type]


def test_a_content_analysis_whose_workers_died_fails_its_token_naming_the_step(aws: Aws) -> None:
    # GIVEN a job's analysis task (its step before the Map) dead-lettered: every worker that took it died
    storage = S3Storage(aws.s3)
    tokens = Tokens()
    task = {"task_token": "tok", "job": {"job_id": "job-1", "work_bucket": "work"}, "step": "content_analysis"}
    outcome = fail_dead_letter(json.dumps(task), 3, storage, tokens)  # type: ignore[arg-type]
    # THEN its token fails naming the analysis, not a merge; no segment record is invented
    assert outcome is not None and outcome.what == "content analysis of job-1"
    assert tokens.failures == [
        ("tok", "AnalysisDeadLettered", "content analysis of job-1 was dead-lettered after 3 deliveries: its "
         "worker died each time"),
    ]  # fmt: skip
    assert not storage.list_keys("work", layout.segments_prefix("job-1"))


def test_a_dead_lettered_backup_copy_never_fails_the_token_the_original_holds(aws: Aws) -> None:
    storage = S3Storage(aws.s3)
    tokens = Tokens()
    task = {**json.loads(body({"index": 4})), "copy_number": 1, "avoid_worker": "w1"}
    assert fail_dead_letter(json.dumps(task), 3, storage, tokens) is None  # type: ignore[arg-type]
    assert tokens.failures == [] and storage.list_keys("work", "work/") == []


def test_a_dead_lettered_segment_marks_its_job_failed_so_its_other_segments_are_dropped(aws: Aws) -> None:
    # GIVEN a segment whose workers died on every delivery
    storage = S3Storage(aws.s3)
    # WHEN its dead letter is handled
    fail_dead_letter(body({"index": 4}), 3, storage, Tokens())  # type: ignore[arg-type]
    # THEN the job's failed marker names the segment, its deliveries and the cause
    marker = job_failed(storage, "work", "job-1")
    assert marker is not None and (marker.segment, marker.attempts, marker.error) == (4, 3, "SegmentDeadLettered")
    assert marker.cause.startswith("segment 4 of job-1 was dead-lettered after 3 deliveries")
    assert marker.by == "dead-letter handler"
