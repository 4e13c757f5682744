"""A batch as every client shows it: one row (a `JobView` of kind "batch") that opens into its items. Pure.

A batch's state follows from its items' (each an ordinary job's, `fusionfleet.jobs.facts`) and its
cancel marker: PENDING before any item started; RUNNING while an item runs or waits its turn;
SUCCEEDED when every item did; CANCELLED once cancelled and nothing of it runs; else FAILED, the reason
naming how many items did not succeed and why the first ones did not. It allows what that state
allows (`fusionfleet.jobs.states`): cancel while it runs, retry (its unsuccessful items) once it ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from fusionfleet import layout
from fusionfleet.jobs.acceptance import Acceptance
from fusionfleet.jobs.batches import BatchRecord
from fusionfleet.jobs.ids import item_id
from fusionfleet.jobs.states import ALLOWED, CANCEL_REASON, JobState
from fusionfleet.jobs.views import JobView, SegmentCounts, parse_time

SHOWN_REASONS = 3  # unsuccessful items named in a failed batch's reason
# A batch's items are shown a page at a time: a batch may hold 1000 (fusionfleet.jobs.manifest.MAX_TARGETS).
DEFAULT_ITEM_PAGE = 50
MAX_ITEM_PAGE = 500


@dataclass(frozen=True)
class ItemView:
    """One item of a batch: its target, and its job's view (None until it started)."""

    index: int
    job_id: str
    target: str
    job: JobView | None

    @property
    def state(self) -> JobState:
        return self.job.state if self.job is not None else JobState.PENDING

    @property
    def started(self) -> bool:
        return self.job is not None and self.job.state is not JobState.PENDING


@dataclass(frozen=True)
class BatchDetail:
    batch: JobView
    items: list[ItemView]


def batch_state(states: Sequence[JobState | None], cancelled: bool) -> JobState:
    """The batch's state from its items' (None: not started) and its cancel marker."""
    if any(state in (JobState.RUNNING,) for state in states):
        return JobState.RUNNING
    # Not started, or queued for its tenant's turn (a tenant's item takes a slot as its jobs do): not ended.
    waiting = [state for state in states if state in (None, JobState.PENDING, JobState.WAITING)]
    if waiting and not cancelled:
        if len(waiting) < len(states):
            return JobState.RUNNING
        return JobState.WAITING if JobState.WAITING in waiting else JobState.PENDING
    if cancelled:
        return JobState.CANCELLED
    return JobState.SUCCEEDED if all(state is JobState.SUCCEEDED for state in states) else JobState.FAILED


def item_counts(states: Sequence[JobState | None]) -> SegmentCounts:
    """Items done (succeeded), failed (ended otherwise), running, of the batch's total."""
    done = sum(1 for state in states if state is JobState.SUCCEEDED)
    failed = sum(1 for state in states if state is not None and state.unsuccessful)
    running = sum(1 for state in states if state is JobState.RUNNING)
    return SegmentCounts(len(states), done, failed, running)


def batch_reason(state: JobState, items: Sequence[ItemView]) -> str:
    if state is JobState.CANCELLED:
        return CANCEL_REASON
    if state is not JobState.FAILED:
        return ""
    unsuccessful = [item for item in items if item.state.unsuccessful]
    shown = "; ".join(
        f"item {item.index} ({item.target}): {item.state.value.lower()}"
        + (f": {item.job.reason}" if item.job is not None and item.job.reason else "")
        for item in unsuccessful[:SHOWN_REASONS]
    )
    more = f"; and {len(unsuccessful) - SHOWN_REASONS} more" if len(unsuccessful) > SHOWN_REASONS else ""
    return f"{len(unsuccessful)} of {len(items)} items did not succeed: {shown}{more}"


def batch_view(record: BatchRecord, items: Sequence[ItemView], cancelled: bool) -> JobView:
    states = [item.job.state if item.job is not None else None for item in items]
    state = batch_state(states, cancelled)
    started = [item.job for item in items if item.job is not None]
    segments = SegmentCounts(
        sum(job.segments.total for job in started), sum(job.segments.done for job in started),
        sum(job.segments.failed for job in started), sum(job.segments.running for job in started),
    )  # fmt: skip
    return JobView(
        job_id=record.batch_id,
        name=layout.manifest_name(record.manifest.key),
        state=state,
        reason=batch_reason(state, items),
        priority=record.priority,
        segments=segments,
        submitted_at=parse_time(record.submitted_at),
        output=f"s3://{record.manifest.bucket}/{record.output_prefix}",
        actions=ALLOWED[state],
        kind="batch",
        items=item_counts(states),
    )


def pending_batch(accepted: Acceptance) -> BatchDetail:
    """A batch whose manifest was accepted and not yet opened by the slicer: PENDING, its items its
    targets as the manifest names them (none yet where it names a prefix: the slicer lists those)."""
    items = [
        ItemView(index, item_id(accepted.job_id, index), target, None) for index, target in enumerate(accepted.targets)
    ] if accepted.items_known else []  # fmt: skip
    view = JobView(
        job_id=accepted.job_id, name=accepted.name, state=JobState.PENDING, priority=accepted.priority,
        submitted_at=parse_time(accepted.submitted_at), actions=ALLOWED[JobState.PENDING], kind="batch",
        items=item_counts([None] * len(items)), targets=accepted.targets,
    )  # fmt: skip
    return BatchDetail(view, items)


def listed_batch(
    record: BatchRecord, newest: dict[str, JobState], cancelled: bool, submitted: datetime | None
) -> JobView:
    """A batch's row in a listing, from its items' newest runs as the listing found them (no item read)."""
    items = []
    for target in record.targets:
        job_id = record.item_id(target.index)
        job = JobView(job_id, job_id, newest[job_id]) if job_id in newest else None
        items.append(ItemView(target.index, job_id, target.key, job))
    view = batch_view(record, items, cancelled)
    return replace(view, submitted_at=view.submitted_at or submitted)


def item_page(items: Sequence[ItemView], first: int, limit: int) -> tuple[list[ItemView], int | None]:
    """Items `first`… (at most `limit`) and the first index of the next page (None: the last page)."""
    page = list(items[first : first + limit])
    return page, (first + limit if first + limit < len(items) else None)


def item_json(item: ItemView) -> dict[str, Any]:
    """An item as every client shows it: its index, job, target, state, progress (its segments), output
    (s3://… once it succeeded) and why it did not succeed. Clients render this; they work nothing out."""
    job = item.job
    segments = job.segments if job is not None else SegmentCounts()
    shown: dict[str, Any] = {
        "index": item.index, "job_id": item.job_id, "target": item.target, "state": item.state.value,
        "segments": {"done": segments.done, "failed": segments.failed, "total": segments.total},
        "output": job.output if job is not None else None, "ended": item.state.ended,
    }  # fmt: skip
    if job is not None and job.reason:
        shown["reason"] = job.reason
    return shown


def tenant_item_json(item: ItemView, download_url: str | None) -> dict[str, Any]:
    """An item as the tenant API shows it: its target's and output's file names, the API's state, its
    progress and a link to its output; no pipeline id (the tenant knows the batch by its own id)."""
    shown = item_json(item)
    shown.pop("job_id")
    shown["target"] = item.target.rsplit("/", 1)[-1]
    shown["state"] = item.state.public.value
    if shown["output"]:
        shown["output"] = str(shown["output"]).rsplit("/", 1)[-1]
    if download_url:
        shown["download_url"] = download_url
    return shown
