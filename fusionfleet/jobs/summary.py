"""A job's summary (`work/<job>/summary.json`): what its listing and its detail show, in one small read.

The read model (`fusionfleet.jobs.reader`) would otherwise read each job's records and list every
segment file of a long job. The parties that change a job keep its summary current:

- the slicer writes it when it takes the job (with the job's entry in the job index, `index_layout.job_index_key`);
- a worker marks each segment it finished or failed (the dead-letter handler, each it gave up on);
- whoever dooms a running job records its cause; a cancel flags it; a retry starts its new run;
- a reader that found the job ended (from the full read) records the view it made, so the next reads
  need nothing more;
- the follower of the job's final notice (`fusionfleet.services.job_end`) records what its run cost,
  every attempt priced: a reader prices a job only when it has few attempt records, so the read of a
  failed job of thousands of them stays inside the API function's 29 s (issue 45).

Many workers finish segments of one job at once, so every change is read, applied and written back with
a conditional PUT (If-Match on the ETag read); a writer that lost the race reads again and reapplies
its change, so no update is lost. Each change is idempotent (a segment marked twice counts once).

A summary is a cache with rules about when it may be believed (the reader's `fast view`): an ended
job's recorded view holds for the run it was made for; a running job's counts hold while its execution
runs and no cancel is flagged. Anything else — no summary (a job from before summaries), a cancel, an
execution that ended with nobody recording it — is read in full.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fusionfleet import index_layout, layout
from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import ObjectMissing
from fusionfleet.messages import JobContext

logger = logging.getLogger(__name__)

# A conditional write lost to another writer is retried this many times, each after a short random
# pause; a summary with this many writers at one instant is far past any fleet's size.
MAX_TRIES = 40
_PAUSE_S = 0.02

DONE: Literal["d"] = "d"
FAILED: Literal["f"] = "f"


class SegmentMark(BaseModel):
    """One finished segment: done or failed, by which worker, on which attempt, its engine seconds."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    s: Literal["d", "f"]
    w: str = ""
    a: int = 0
    e: float = 0.0


class EndedView(BaseModel):
    """The view of an ended run, as a full read made it (state, reason, the merge's result)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    run: int
    state: str
    reason: str = ""
    result: dict[str, Any] | None = None
    # What the run cost, every attempt priced (`fusionfleet.jobs.views.cost`), as the read that recorded
    # the end found it: the merge's own figure for a job that merged, else its attempt records' once.
    cost: dict[str, Any] | None = None


class RunCost(BaseModel):
    """What a run cost, every attempt of the job priced (`fusionfleet.jobs.views.attempts_cost`), as the
    follower of its final notice found it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    run: int
    cost: dict[str, Any]


class JobSummary(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    job_id: str
    name: str
    priority: str = ""
    submitted_at: str = ""
    total: int = 0
    output: str = ""  # s3://… where the job's output goes
    run: int = 0
    cancelled: bool = False
    doomed: str = ""  # the cause that dooms the current run, once one is known
    segments: dict[int, SegmentMark] = Field(default_factory=dict)
    ended: EndedView | None = None
    priced: RunCost | None = None

    @property
    def done(self) -> frozenset[int]:
        return frozenset(index for index, mark in self.segments.items() if mark.s == DONE)

    @property
    def failed(self) -> frozenset[int]:
        return frozenset(index for index, mark in self.segments.items() if mark.s == FAILED)

    @property
    def ended_view(self) -> EndedView | None:
        """The recorded view of the current run's end; None while it runs (or nobody recorded it)."""
        return self.ended if self.ended is not None and self.ended.run == self.run else None

    @property
    def ended_cost(self) -> dict[str, Any] | None:
        """The current run's cost once it ended: the recorded end's, else the notice follower's."""
        ended = self.ended_view
        if ended is None:
            return None
        if ended.cost is not None:
            return ended.cost
        return self.priced.cost if self.priced is not None and self.priced.run == self.run else None


# ---------------------------------------------------------------------- the changes (pure)
def started(context: JobContext) -> JobSummary:
    return JobSummary(
        job_id=context.job_id, name=layout.manifest_name(context.manifest.key), priority=str(context.priority),
        submitted_at=context.submitted_at, total=context.segment_count,
        output=f"s3://{context.output.bucket}/{context.output.key}", run=context.run,
    )  # fmt: skip


def segment_done(index: int, worker: str, attempt: int, engine_s: float) -> Callable[[JobSummary], JobSummary]:
    def change(summary: JobSummary) -> JobSummary:
        mark = SegmentMark(s=DONE, w=worker, a=attempt, e=round(engine_s, 3))
        return summary.model_copy(update={"segments": {**summary.segments, index: mark}})

    return change


def segment_failed(index: int, worker: str, attempt: int) -> Callable[[JobSummary], JobSummary]:
    """A failure never hides a success (another delivery, or an earlier run, rendered the segment)."""

    def change(summary: JobSummary) -> JobSummary:
        known = summary.segments.get(index)
        if known is not None and known.s == DONE:
            return summary
        mark = SegmentMark(s=FAILED, w=worker, a=attempt)
        return summary.model_copy(update={"segments": {**summary.segments, index: mark}})

    return change


def doomed(run: int, cause: str) -> Callable[[JobSummary], JobSummary]:
    """The first cause known stands, as the job-failed marker's does (`fusionfleet.jobs.loss`)."""

    def change(summary: JobSummary) -> JobSummary:
        if summary.run != run or summary.doomed:
            return summary
        return summary.model_copy(update={"doomed": cause})

    return change


def cancelled(summary: JobSummary) -> JobSummary:
    return summary.model_copy(update={"cancelled": True})


def retried(run: int) -> Callable[[JobSummary], JobSummary]:
    """A new run: nothing recorded about the last one's end holds any more."""

    def change(summary: JobSummary) -> JobSummary:
        return summary.model_copy(update={"run": run, "cancelled": False, "doomed": "", "ended": None, "priced": None})

    return change


def ended(
    view: EndedView, done: frozenset[int] = frozenset(), failed: frozenset[int] = frozenset()
) -> Callable[[JobSummary], JobSummary]:
    """The run's end, and the segments its files say are done or failed (`done`, `failed`): a mark a
    writer failed to record is made good here, so an ended job's counts are its files' for good."""

    def change(summary: JobSummary) -> JobSummary:
        if view.run != summary.run:
            return summary
        marks = dict(summary.segments)
        for index in done:
            if index not in marks or marks[index].s != DONE:
                marks[index] = SegmentMark(s=DONE)
        for index in failed - done:
            if index not in marks:
                marks[index] = SegmentMark(s=FAILED)
        return summary.model_copy(update={"ended": view, "segments": marks})

    return change


def costed(run: int, cost: dict[str, Any]) -> Callable[[JobSummary], JobSummary]:
    """Run `run`'s cost, as the follower of its final notice priced it (again on each later round, while
    a losing copy was still stopping); nothing for an earlier run."""

    def change(summary: JobSummary) -> JobSummary:
        if summary.run != run:
            return summary
        return summary.model_copy(update={"priced": RunCost(run=run, cost=cost)})

    return change


# ---------------------------------------------------------------------- reading and writing
def write(storage: Storage, bucket: str, summary: JobSummary, submitted_ms: int, indexed: bool = True) -> None:
    """A new job's summary and (`indexed`) its entry in the job index (the slicer)."""
    key = layout.summary_key(summary.job_id)
    storage.put_bytes(bucket, key, summary.model_dump_json().encode(), "application/json")
    if indexed:
        index_entry(storage, bucket, summary.job_id, submitted_ms)


def submitted_ms(submitted_at: str) -> int:
    """Milliseconds since the epoch of an ISO 8601 time (0 when it is not one: listed last)."""
    try:
        parsed = datetime.fromisoformat(submitted_at)
    except ValueError:
        return 0
    return int((parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp() * 1000)


def index_entry(storage: Storage, bucket: str, job_id: str, submitted_ms: int) -> None:
    storage.put_bytes(bucket, index_layout.job_index_key(job_id, submitted_ms), b"{}", "application/json")


def read(storage: Storage, bucket: str, job_id: str) -> JobSummary | None:
    try:
        raw = storage.get_bytes(bucket, layout.summary_key(job_id))
    except ObjectMissing:
        return None
    try:
        return JobSummary.model_validate_json(raw)
    except ValueError:
        return None  # unreadable: the job is read in full


def update(storage: Storage, bucket: str, job_id: str, change: Callable[[JobSummary], JobSummary]) -> JobSummary | None:
    """Apply `change` to the job's summary without losing another writer's change; None when the job
    has no summary (one from before summaries: its readers read it in full)."""
    key = layout.summary_key(job_id)
    for _ in range(MAX_TRIES):
        try:
            raw, etag = storage.get_tagged(bucket, key)
        except ObjectMissing:
            return None
        current = JobSummary.model_validate_json(raw)
        changed = change(current)
        if changed == current:
            return current
        if storage.replace(bucket, key, changed.model_dump_json().encode(), etag):
            return changed
        time.sleep(random.uniform(0, _PAUSE_S))  # a pause, not a secret
    raise RuntimeError(f"the summary of job {job_id} changed under {MAX_TRIES} tries in a row")


def try_update(storage: Storage, bucket: str, job_id: str, change: Callable[[JobSummary], JobSummary]) -> None:
    """`update` for a party whose own work is done already: a failure to record it is logged, not raised.
    The summary then lags (a running job's counts) until the job ends: the read that records its end
    takes its counts from its files."""
    try:
        update(storage, bucket, job_id, change)
    except Exception:
        logger.warning("job %s: its summary was not updated", job_id, exc_info=True)
