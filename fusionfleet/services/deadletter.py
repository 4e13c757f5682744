"""Dead-lettered tasks: fail their task token at once, so the job ends with a notification in
minutes rather than at the end of a long heartbeat wait.

Most poison segments were already failed by the worker that saw the last attempt fail; this covers
the ones whose workers died with them (kill -9, a lost host) on every attempt.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from fusionfleet import layout
from fusionfleet.adapters.orchestrator import TaskCallbacks
from fusionfleet.adapters.storage import Storage, get_json, put_json
from fusionfleet.errors import ObjectMissing, TokenGone
from fusionfleet.jobs import summary
from fusionfleet.jobs.failures import segment_failure, segment_label
from fusionfleet.jobs.loss import JobFailedMarker, mark_job_failed
from fusionfleet.jobs.states import Recorded
from fusionfleet.messages import SegmentRecord

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeadLetterOutcome:
    job_id: str
    what: str
    reason: str
    already_closed: bool


def _last_error(storage: Storage, bucket: str, job_id: str, index: int) -> SegmentRecord | None:
    try:
        return SegmentRecord.model_validate(get_json(storage, bucket, layout.segment_record_key(job_id, index)))
    except ObjectMissing:
        return None


def fail_dead_letter(
    body: str, attempts: int, storage: Storage, orchestrator: TaskCallbacks
) -> DeadLetterOutcome | None:
    """Fail the token of one dead-lettered task message; None when the message is not a task."""
    try:
        task: dict[str, Any] = json.loads(body)
        token = str(task["task_token"])
        job = task["job"]
        job_id, bucket = str(job["job_id"]), str(job["work_bucket"])
    except (ValueError, KeyError, TypeError):
        logger.error("dead letter is not a task message; dropping it")
        return None
    segment = task.get("segment")
    if int(task.get("copy_number", 0) or 0) > 0:
        # A straggler's backup copy whose workers died: the original still holds the token.
        logger.warning("dead-lettered backup copy of a segment of %s dropped; the original carries on", job_id)
        return None
    if isinstance(segment, dict) and "index" in segment:
        index = int(segment["index"])
        start, end = segment.get("start_frame"), segment.get("end_frame")
        label = segment_label(index, *((int(start), int(end)) if start is not None and end is not None else ()))
        what = f"segment {index} of {job_id}"
        record = _last_error(storage, bucket, job_id, index)
        if record is not None and record.status == Recorded.FAILED:
            reason = segment_failure(f"{label} of {job_id}", attempts, record.error, record.reason)
        else:
            reason = f"{label} of {job_id} was dead-lettered after {attempts} deliveries: its worker died each time"
        if record is None:
            # Never over a success: a retry of the job may have rendered the segment since.
            put_json(
                storage,
                bucket,
                layout.segment_record_key(job_id, index),
                SegmentRecord(
                    job_id=job_id,
                    index=index,
                    status=Recorded.FAILED,
                    error="DeadLettered",
                    reason=reason,
                    attempt=attempts,
                ).model_dump(),
            )
            summary.try_update(storage, bucket, job_id, summary.segment_failed(index, "", attempts))
        error = "SegmentDeadLettered"
        # The job is lost: its other segments need not render (fusionfleet.jobs.loss).
        marker = JobFailedMarker(
            job_id=job_id, run=int(job.get("run", 0) or 0), segment=index, attempts=attempts, error=error,
            cause=reason, by="dead-letter handler", at=time.time(),
        )  # fmt: skip
        mark_job_failed(storage, bucket, marker)
    elif task.get("step") == "content_analysis":
        # The job's content analysis (its step before the Map): no segment was sent, nothing else to stop.
        what = f"content analysis of {job_id}"
        reason = f"{what} was dead-lettered after {attempts} deliveries: its worker died each time"
        error = "AnalysisDeadLettered"
    else:
        what = f"merge of {job_id}"
        reason = f"{what} was dead-lettered after {attempts} deliveries"
        error = "MergeDeadLettered"
    try:
        orchestrator.task_failure(token, error, reason)
        closed = False
    except TokenGone:
        closed = True  # the worker that saw the last attempt fail got there first
    logger.warning("%s: %s", reason, "token already closed" if closed else "token failed")
    return DeadLetterOutcome(job_id, what, reason, closed)
