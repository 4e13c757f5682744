"""The views of a job and its segments that every client renders: one type each, built here. Pure.

`JobView` is what the CLI's `status`, `list` and `submit --wait`, the operator's dashboard, the tenant
API and its page show of a job: its state and reason, its segments' counts, its output, and the
actions it allows now. `JobDetail` adds the segment grid, every attempt, timings and cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from fusionfleet import layout
from fusionfleet.adapters.links import PresignedLink
from fusionfleet.facefusion.content_analysis import AnalysisProgress
from fusionfleet.jobs.cost import GpuPrices, attempts_cost
from fusionfleet.jobs.facts import JobFacts, SegmentFiles
from fusionfleet.jobs.plan import Segment
from fusionfleet.jobs.states import ALLOWED, Action, JobState, SegmentState
from fusionfleet.jobs.summary import DONE, JobSummary
from fusionfleet.json_http import plain
from fusionfleet.messages import SegmentAttempt


@dataclass(frozen=True)
class SegmentCounts:
    """A job's segments: done and failed (their records, over every run), in flight (the orchestrator's
    count of the current run, where a reader asked for it), pending (the rest)."""

    total: int = 0
    done: int = 0
    failed: int = 0
    running: int = 0

    @property
    def pending(self) -> int:
        return max(0, self.total - self.done - self.failed - self.running)


@dataclass(frozen=True)
class JobResult:
    """What a job that succeeded made: the merge's result, as its execution's output holds it."""

    bucket: str
    key: str
    uri: str
    frames: int
    duration_s: float
    timings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobView:
    job_id: str
    name: str
    state: JobState
    reason: str = ""
    priority: str = ""
    segments: SegmentCounts = SegmentCounts()
    submitted_at: datetime | None = None
    output: str | None = None  # s3://… of a job that succeeded
    result: JobResult | None = None
    actions: tuple[Action, ...] = ()
    # A link to the output signed by a reader with the right to (the CLI, the tenant API): a notice's
    # link may have died with the merge task's role session (fusionfleet.adapters.links).
    download: PresignedLink | None = None
    # While the job's content analysis (its step before the segments) runs: how far it has read the target.
    analysis: AnalysisProgress | None = None
    # "batch" for a batch (fusionfleet.jobs.batch_views): `items` counts its items as `segments` counts a
    # job's segments (its `segments`: the started items' segments together); `output` is its prefix.
    kind: str = "job"
    items: SegmentCounts = SegmentCounts()
    # A test render that succeeded, as a reader with the right to sign shows it: (frame, link) per picture.
    pictures: tuple[tuple[int, str], ...] = ()
    # What its manifest names while it waits for the slicer (fusionfleet.jobs.acceptance): its target,
    # or a batch's targets; empty where the reader did not need the manifest.
    targets: tuple[str, ...] = ()

    @property
    def ended(self) -> bool:
        return self.state.ended

    @property
    def output_object(self) -> tuple[str, str] | None:
        """(bucket, key) of the output of a job that succeeded."""
        if not self.output:
            return None
        bucket, _, key = self.output.removeprefix("s3://").partition("/")
        return (bucket, key) if bucket and key else None

    def public(self, job_id: str) -> JobView:
        """As a tenant is shown it: under the id the tenant knows it by, in the API's states."""
        return replace(self, job_id=job_id, state=self.state.public)


def pending_view(job_id: str, reason: str = "", priority: str = "", submitted_at: datetime | None = None) -> JobView:
    """A job accepted and not yet running (its files awaited, or not yet sliced)."""
    return JobView(job_id, job_id, JobState.PENDING, reason, priority, submitted_at=submitted_at,
                   actions=ALLOWED[JobState.PENDING])  # fmt: skip


@dataclass(frozen=True)
class SegmentView:
    index: int
    start_frame: int
    end_frame: int
    state: SegmentState
    worker: str
    attempt: int


@dataclass(frozen=True)
class AttemptView:
    segment: int
    attempt: int  # 1, 2, … over every run of the job (a retry's first attempt follows the last one before it)
    worker: str
    status: str  # running | succeeded | failed | released | cancelled | superseded
    started_at: float  # epoch seconds
    finished_at: float  # epoch seconds; 0 while running
    engine_s: float
    error: str
    reason: str
    copy_number: int = 0  # 1: the watchdog's backup copy of a straggler


@dataclass(frozen=True)
class JobDetail:
    job: JobView
    segments: list[SegmentView]
    attempts: list[AttemptView]
    timings: dict[str, Any]
    preview_key: str | None
    # GPU-seconds and dollars of every attempt so far (fusionfleet.jobs.cost); `final` once it ended
    # and no attempt still runs.
    cost: dict[str, Any] | None = None
    # Its webhook's events, each with every attempt to deliver it (fusionfleet.webhooks.records).
    deliveries: list[dict[str, object]] = field(default_factory=list)


def job_view(
    facts: JobFacts, files: SegmentFiles | None, in_flight: int = 0, submitted: datetime | None = None
) -> JobView:
    """The view of a job from its facts and its segment files (None: not listed, as for a rejected job)."""
    state, context = facts.state, facts.context
    result = job_result(facts) if state is JobState.SUCCEEDED else None
    view = JobView(facts.job_id, facts.job_id, state, facts.reason, actions=ALLOWED[state], result=result)
    if context is None and facts.accepted is not None and facts.rejection is None:
        accepted = facts.accepted
        return replace(
            view, name=accepted.name, priority=accepted.priority, submitted_at=parse_time(accepted.submitted_at),
            targets=accepted.targets,
        )  # fmt: skip
    if context is None:
        manifest = (facts.rejection or {}).get("manifest") or {}
        name = layout.manifest_name(str(manifest.get("key", facts.job_id))) if facts.rejection else facts.job_id
        return replace(view, name=name, submitted_at=submitted, output=result.uri if result else None)
    files = files or SegmentFiles()
    return replace(
        view, name=layout.manifest_name(context.manifest.key), priority=context.priority,
        segments=SegmentCounts(context.segment_count, len(files.done), len(files.failed), in_flight),
        submitted_at=parse_time(context.submitted_at),
        output=f"s3://{context.output.bucket}/{context.output.key}" if state is JobState.SUCCEEDED else None,
    )  # fmt: skip


def summary_view(summary: JobSummary, state: JobState, reason: str, result: dict[str, Any] | None) -> JobView:
    """The view of a job from its summary (`fusionfleet.jobs.summary`), in the state the reader found."""
    found = result_of(result or {}) if state is JobState.SUCCEEDED else None
    return JobView(
        summary.job_id, summary.name, state, reason, summary.priority,
        SegmentCounts(summary.total, len(summary.done), len(summary.failed)),
        parse_time(summary.submitted_at), summary.output if state is JobState.SUCCEEDED else None, found,
        ALLOWED[state],
    )  # fmt: skip


def summary_segment(segment: Segment, summary: JobSummary) -> SegmentView:
    """A segment as the summary knows it: done or failed (by whom, which attempt), else pending."""
    mark = summary.segments.get(segment.index)
    if mark is None:
        return SegmentView(segment.index, segment.start_frame, segment.end_frame, SegmentState.PENDING, "", 0)
    shown = SegmentState.DONE if mark.s == DONE else SegmentState.FAILED
    return SegmentView(segment.index, segment.start_frame, segment.end_frame, shown, mark.w, mark.a)


def job_result(facts: JobFacts) -> JobResult | None:
    output = (facts.execution.output if facts.execution is not None else None) or {}
    return result_of(output)


def result_of(output: dict[str, Any]) -> JobResult | None:
    """The merge's result, from its execution's output (or as a summary recorded it)."""
    where = output.get("output")
    if not isinstance(where, dict) or not where.get("bucket") or not where.get("key"):
        return None
    timings = output.get("timings")
    return JobResult(
        bucket=str(where["bucket"]), key=str(where["key"]), uri=str(where.get("uri", "")),
        frames=int(output.get("frames", 0)), duration_s=float(output.get("duration_s", 0.0)),
        timings=dict(timings) if isinstance(timings, dict) else {},
    )  # fmt: skip


def segment_view(segment: Segment, facts: JobFacts, files: SegmentFiles, stored: list[SegmentAttempt]) -> SegmentView:
    """A segment's state, the worker and attempt that last took it (the one that rendered it, if done)."""
    state = facts.state
    mine = [record for record in stored if record.index == segment.index]
    latest = mine[-1] if mine else None
    worker, attempt = (latest.worker, len(mine)) if latest else ("", 0)
    running = state is JobState.RUNNING
    if segment.index in files.done:
        shown = SegmentState.DONE
        done = [record for record in mine if record.status == "succeeded"]
        if done:
            worker, attempt = done[-1].worker, mine.index(done[-1]) + 1
    elif running and latest is not None and latest.status == "running" and latest.run == facts.run.run:
        shown = SegmentState.RUNNING
    elif (
        running
        and facts.run.run > 0
        and segment.index in facts.run.segments
        and (latest is None or latest.run < facts.run.run)
    ):
        shown = SegmentState.PENDING  # the retry has not reached it yet
    elif segment.index in files.failed or (latest is not None and latest.status == "failed" and not running):
        shown = SegmentState.FAILED
    else:
        shown = SegmentState.PENDING
    return SegmentView(segment.index, segment.start_frame, segment.end_frame, shown, worker, attempt)


def numbered(stored: list[SegmentAttempt]) -> list[AttemptView]:
    """Attempt records as people read them: numbered 1, 2, … per segment across every run."""
    views: list[AttemptView] = []
    counts: dict[int, int] = {}
    for record in stored:
        counts[record.index] = counts.get(record.index, 0) + 1
        views.append(
            AttemptView(
                segment=record.index, attempt=counts[record.index], worker=record.worker, status=record.status,
                started_at=record.started_at, finished_at=record.finished_at, engine_s=record.engine_s,
                error=record.error, reason=record.reason, copy_number=record.copy_number,
            )
        )  # fmt: skip
    return views


def timings(facts: JobFacts, stored: list[SegmentAttempt]) -> dict[str, Any]:
    """The merge's timings once it ran, else what the job's records say so far."""
    execution = facts.execution
    found: dict[str, Any] = {}
    if execution is not None and execution.output and isinstance(execution.output.get("timings"), dict):
        found.update(execution.output["timings"])
    if facts.context is not None:
        found.setdefault("submitted_at", facts.context.submitted_at)
    if execution is not None:
        if execution.started:
            found.setdefault("started_at", execution.started.isoformat())
        if execution.stopped:
            found.setdefault("stopped_at", execution.stopped.isoformat())
    ended = [record for record in stored if record.finished_at]
    found.setdefault("engine_s", round(sum(r.engine_s for r in ended if r.status == "succeeded"), 3))
    found.setdefault("worker_s", round(sum(r.finished_at - r.started_at for r in ended), 3))
    if ended:
        found.setdefault("render_s", round(max(r.finished_at for r in ended) - min(r.started_at for r in stored), 3))
    found["attempts"] = len(stored)
    found["run"] = facts.run.run
    return found


def cost(
    facts: JobFacts, stored: list[SegmentAttempt], now: float, prices: GpuPrices | None = None
) -> dict[str, Any] | None:
    """Every attempt so far (failed, killed, backup copies) at its worker's price (fusionfleet.jobs.cost);
    `final` once the job ended and no attempt still runs."""
    return attempts_cost(stored, now, facts.state.ended, prices)


def view_json(view: JobView) -> dict[str, Any]:
    """A job's view as JSON values, every field, and whether it has ended (the operator's dashboard)."""
    return {**plain(view), "ended": view.ended}


def tenant_json(view: JobView) -> dict[str, Any]:
    """A job as the tenant API answers for it (GET /jobs/{id}, each of GET /jobs): its contract."""
    shown: dict[str, Any] = {
        "job_id": view.job_id,
        "state": view.state.value,
        "segments": {"done": view.segments.done, "failed": view.segments.failed, "total": view.segments.total},
        "ended": view.ended,
        "actions": [action.value for action in view.actions],
    }
    if view.priority:
        shown["priority"] = view.priority
    if view.reason:
        shown["reason"] = view.reason
    if view.download is not None:
        shown["download_url"] = view.download.url
    if view.submitted_at is not None:
        shown["created_at"] = view.submitted_at.isoformat()
    if view.pictures:
        shown["frames"] = [{"frame": frame, "download_url": url} for frame, url in view.pictures]
    if view.targets:  # known before the slicer takes the job: the file names, as the tenant sent them
        shown["targets"] = [target.rsplit("/", 1)[-1] for target in view.targets]
    if view.kind == "batch":
        shown["kind"] = "batch"
        shown["items"] = {"done": view.items.done, "failed": view.items.failed, "running": view.items.running,
                          "total": view.items.total}  # fmt: skip
    return shown


def parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
