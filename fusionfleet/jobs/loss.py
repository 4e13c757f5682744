"""The job-failed marker: written once by whoever first knows a job is lost, read by everyone else.

A segment that failed for good dooms its job, but the job's other segments may sit behind a deep
backlog, and LocalStack's Distributed Map keeps dispatching after a failed item: without a marker
they would all be rendered before the merge gate says what was known long before. With it, workers
drop the job's queued segments unrendered and stop the ones they render, and the watchdog stops the
execution and publishes the one failure notice, naming the segment, its attempts and the cause.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from fusionfleet import layout
from fusionfleet.adapters.storage import Storage, get_json
from fusionfleet.errors import ObjectMissing
from fusionfleet.jobs import summary


class JobFailedMarker(BaseModel):
    # Written by workers and the dead-letter handler, read by workers and the watchdog, which run
    # different versions during a deploy: a reader ignores fields a newer writer added.
    model_config = ConfigDict(extra="ignore", frozen=True)

    job_id: str
    run: int = 0  # the run it doomed; a retry starts a new run without the marker
    segment: int | None = None  # None: the job, not one segment (e.g. its merge)
    attempts: int = 0
    error: str  # the error name the notice carries, e.g. SegmentFailed
    cause: str  # says what failed, after how many attempts, and why (fusionfleet.jobs.failures)
    by: str  # who knew first: `worker <name>`, `dead-letter handler`, …
    at: float  # epoch seconds


def mark_job_failed(storage: Storage, bucket: str, marker: JobFailedMarker) -> bool:
    """Write the marker unless one exists (the first knower's cause stands); True when this one was written."""
    written = storage.create(bucket, layout.job_failed_key(marker.job_id), marker.model_dump_json().encode())
    if written:
        summary.try_update(storage, bucket, marker.job_id, summary.doomed(marker.run, marker.cause))
    return written


def job_failed(storage: Storage, bucket: str, job_id: str) -> JobFailedMarker | None:
    try:
        return JobFailedMarker.model_validate(get_json(storage, bucket, layout.job_failed_key(job_id)))
    except ObjectMissing:
        return None


def is_job_failed(storage: Storage, bucket: str, job_id: str) -> bool:
    """A HEAD only: what a worker asks every few seconds while it renders."""
    try:
        storage.head(bucket, layout.job_failed_key(job_id))
    except ObjectMissing:
        return False
    return True
