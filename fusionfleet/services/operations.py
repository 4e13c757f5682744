"""Operating the farm: see the jobs and workers, and steer them (cancel, retry).

The one place the CLI, the dashboard and the tenant API get their data and actions from. Everything comes from
what the farm already keeps (no database of our own): Step Functions executions (one per run of a
job, `fusionfleet.jobs.runs`), the records in the work bucket (job, plan, segment and attempt records,
the cancel marker, the notice record, the workers' presence records).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from fusionfleet import layout
from fusionfleet.adapters.notify import Notifier, notice_subject
from fusionfleet.adapters.orchestrator import TERMINAL, ExecutionMissing, Orchestrator, execution_arn
from fusionfleet.adapters.storage import Storage, get_json, put_json
from fusionfleet.errors import JobNotFound, ObjectMissing, OperationRefused
from fusionfleet.fleet.tenants import notice_tenant
from fusionfleet.jobs.cost import DEFAULT_GPU_HOURLY_PRICE
from fusionfleet.jobs.ids import tenant_of_job
from fusionfleet.jobs.plan import Segment
from fusionfleet.jobs.runs import RunRecord, execution_name, record_run
from fusionfleet.jobs.state import CANCEL_REASON, JOB_STATES, JobFacts, JobStates, SegmentFiles, job_state
from fusionfleet.messages import SegmentAttempt, SegmentRecord, WorkerBeat
from fusionfleet.services.watchdog import NOTICE_NOT_CLAIMED_ERROR, NOTICE_STATES, NOTIFIED_FAILURE_ERROR

__all__ = [
    "CANCEL_REASON",
    "JOB_STATES",
    "AttemptRecord",
    "FarmResources",
    "JobDetail",
    "JobNotFound",
    "JobSummary",
    "OperationRefused",
    "Operations",
    "SegmentView",
    "WorkerView",
    "job_state",
]

RETRYABLE = ("FAILED", "CANCELLED", "TIMED_OUT", "ABORTED")
SEGMENT_STATES = ("pending", "running", "done", "failed")
CANCEL_ERROR = "JobCancelled"
# A cancel that claimed the notice and died before publishing is finished by another after this.
RECLAIM_S = 120.0
DEFAULT_LOST_AFTER_S = 30.0
FORGET_AFTER_S = 24 * 3600.0


class FarmResources(Protocol):
    """What operations need of a stack: the CLI's `StackResources`, or a Lambda's settings."""

    @property
    def work_bucket(self) -> str: ...
    @property
    def state_machine_arn(self) -> str: ...
    @property
    def topic_arn(self) -> str: ...


@dataclass(frozen=True)
class JobSummary:
    job_id: str
    name: str
    state: str  # one of JOB_STATES
    priority: str
    segments_done: int
    segments_failed: int
    segments_total: int
    submitted_at: datetime | None
    output: str | None
    reason: str


@dataclass(frozen=True)
class AttemptRecord:
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
class SegmentView:
    index: int
    start_frame: int
    end_frame: int
    state: str  # one of SEGMENT_STATES
    worker: str
    attempt: int


@dataclass(frozen=True)
class JobDetail:
    summary: JobSummary
    segments: list[SegmentView]
    attempts: list[AttemptRecord]
    timings: dict[str, Any]
    preview_key: str | None
    # GPU-seconds and dollars: the merge's figure once the job succeeded, else what its attempts so far
    # have used (failed attempts are billed too) at the default price; `final` says which.
    cost: dict[str, Any] | None = None


@dataclass(frozen=True)
class WorkerView:
    name: str
    role: str
    engine: str
    current: str | None  # `<job_id>:<segment>` or `<job_id>:merge` while it works
    segments_done: int
    last_heartbeat: datetime
    lost: bool


@dataclass
class Operations:
    storage: Storage
    orchestrator: Orchestrator
    notifier: Notifier
    resources: FarmResources
    lost_after_s: float = DEFAULT_LOST_AFTER_S
    clock: Callable[[], float] = field(default=time.time)
    # Workers lost for longer than this (replaced hosts, old ECS tasks) are no longer listed.
    forget_after_s: float = FORGET_AFTER_S

    # ------------------------------------------------------------------ reading
    def list_jobs(self, state: str | None = None, limit: int = 20, tenant: str | None = None) -> list[JobSummary]:
        """Recent jobs, newest first; `state` keeps only jobs in that state, `tenant` only its jobs ("-": none's)."""
        if state is not None and state not in JOB_STATES:
            raise OperationRefused(f"unknown state {state!r}: one of {', '.join(JOB_STATES)}")
        candidates = self._candidates()
        summaries: list[JobSummary] = []
        for job_id, _started, hint in candidates:
            if len(summaries) >= limit:
                break
            if state is not None and not _could_be(hint, state):
                continue
            if tenant is not None and notice_tenant(tenant_of_job(job_id)) != tenant:
                continue
            try:
                summary = self._summary(self._facts(job_id))
            except JobNotFound:
                continue
            if state is None or summary.state == state:
                summaries.append(summary)
        return summaries

    def summary(self, job_id: str) -> JobSummary:
        """One job's state and segment counts, without its plan and attempt records."""
        return self._summary(self._facts(job_id))

    def job(self, job_id: str) -> JobDetail:
        facts = self._facts(job_id)
        listing = self._listing(job_id) if facts.context else SegmentFiles()
        summary = self._summary(facts, listing)
        if facts.context is None:
            return JobDetail(summary, [], [], {}, None)
        stored = self._attempts(job_id, listing)
        plan = self._plan(job_id)
        segments = [self._segment_view(segment, facts, summary.state, listing, stored) for segment in plan]
        return JobDetail(
            summary=summary,
            segments=segments,
            attempts=_numbered(stored),
            timings=self._timings(facts, stored),
            preview_key=self._preview(job_id),
            cost=self._cost(facts, stored),
        )

    def logs(self, job_id: str, segment: int | None = None) -> list[AttemptRecord]:
        """What each attempt of each segment did (or of one segment), in order."""
        facts = self._facts(job_id)
        if facts.context is None:
            return []
        listing = self._listing(job_id)
        records = _numbered(self._attempts(job_id, listing))
        return [record for record in records if segment is None or record.segment == segment]

    def workers(self) -> list[WorkerView]:
        """Every worker with a presence record; one whose last beat is older than `lost_after_s` is lost.

        Alive workers first, then lost ones; a worker lost for more than `forget_after_s` is left out.
        """
        now = self.clock()
        views = []
        for key in self.storage.list_keys(self.resources.work_bucket, layout.WORKERS_PREFIX):
            try:
                beat = WorkerBeat.model_validate_json(self.storage.get_bytes(self.resources.work_bucket, key))
            except ObjectMissing:
                continue  # it exited cleanly between the listing and the read
            except ValueError:
                continue  # not a presence record
            if now - beat.last_beat > self.forget_after_s:
                continue
            views.append(
                WorkerView(
                    name=beat.name,
                    role=beat.role,
                    engine=beat.engine,
                    current=beat.current,
                    segments_done=beat.segments_done,
                    last_heartbeat=datetime.fromtimestamp(beat.last_beat, UTC),
                    lost=now - beat.last_beat > self.lost_after_s,
                )
            )
        return sorted(views, key=lambda view: (view.lost, view.role, view.name))

    def preview(self, job_id: str) -> bytes | None:
        """The latest rendered frame of the job as a small JPEG, or None before its first chunk."""
        try:
            return self.storage.get_bytes(self.resources.work_bucket, layout.frame_preview_key(job_id))
        except ObjectMissing:
            self._facts(job_id)  # an unknown job is JobNotFound, not "no preview yet"
            return None

    # ------------------------------------------------------------------ actions
    def cancel(self, job_id: str) -> str:
        """Stop a running job; it ends CANCELLED with exactly one notice saying so."""
        facts = self._facts(job_id)
        state = facts.state
        if state != "RUNNING" or facts.execution is None or facts.context is None:
            raise OperationRefused(
                f"job {job_id} is {state}: "
                + (
                    "it has not started yet, nothing to cancel"
                    if state == "PENDING"
                    else "it has ended, nothing to cancel"
                )
            )
        bucket = self.resources.work_bucket
        now = datetime.fromtimestamp(self.clock(), UTC)
        # The notice is claimed first, so the watchdog never notifies the stopped execution itself.
        if not self._claim_notice(job_id, now):
            raise OperationRefused(f"job {job_id} is already being cancelled or closed; its notice is on its way")
        self._stop(facts.execution.arn)
        # Then the marker: workers drop the job's queued segments and stop the one they render. After
        # the stop, so each task they drop gets its heartbeat once its execution is stopping.
        put_json(
            self.storage, bucket, layout.cancel_key(job_id), {"cancelled_at": now.isoformat(), "run": facts.run.run}
        )
        after = self.orchestrator.describe(facts.execution.arn)
        if after.status == "SUCCEEDED" or (after.status == "FAILED" and after.error == NOTIFIED_FAILURE_ERROR):
            # It ended by itself, with its own notice, before the stop: nothing was cancelled.
            self.storage.delete_prefix(bucket, layout.cancel_key(job_id))
            self._mark_notice(job_id, published_by="state machine", reason=f"ended {after.status} before the cancel")
            raise OperationRefused(f"job {job_id} ended {after.status} before it could be cancelled; nothing changed")
        if after.status == "FAILED" and after.error == NOTICE_NOT_CLAIMED_ERROR:
            # It had merged (or failed) and was about to notify when the stop landed, and yielded the
            # notice to the cancel's claim: the job ended by itself, so its own notice is the one sent.
            self._publish_prepared(job_id, facts.execution.arn)
        listing = self._listing(job_id)
        notice = {
            "status": "cancelled",
            "stage": "cancel",
            "job_id": job_id,
            "tenant": notice_tenant(facts.context.tenant),
            "manifest": facts.context.manifest.model_dump(),
            "error": CANCEL_ERROR,
            "reason": CANCEL_REASON,
            "segments_done": len(listing.done),
            "segments_total": facts.context.segment_count,
            "cancelled_at": now.isoformat(),
        }
        self.notifier.publish(self.resources.topic_arn, notice_subject(job_id, "cancelled"), notice)
        self._mark_notice(job_id, published_by="cancel", reason=CANCEL_REASON)
        return (
            f"job {job_id} cancelled: {len(listing.done)} of {facts.context.segment_count} segments had rendered; "
            "its queued segments will not be rendered"
        )

    def retry(self, job_id: str) -> str:
        """Run an ended, unsuccessful job again, rendering only the segments that have no valid output."""
        facts = self._facts(job_id)
        state = facts.state
        if state not in RETRYABLE or facts.context is None:
            raise OperationRefused(f"job {job_id} is {state}: {_why_not_retry(state)}")
        if facts.execution is not None and facts.execution.status == "RUNNING":
            raise OperationRefused(
                f"job {job_id} is cancelled but its execution is still stopping; retry it in a moment"
            )
        # The current run's input: a job uploaded again after its record expired started over as a
        # later run, and its first execution's input is the earlier job's.
        first = (facts.execution.input if facts.execution is not None else None) or self._first_input(job_id)
        if not first or "job" not in first:
            raise OperationRefused(f"job {job_id}: its first run's input is not available, so it cannot be retried")
        bucket = self.resources.work_bucket
        plan = self._plan(job_id)
        missing = [segment for segment in plan if not self._valid(job_id, segment.index)]
        run = facts.run.run + 1
        name = execution_name(job_id, run)
        # The new run starts clean: no job-failed or cancel marker, no notice record (the watchdog
        # watches it afresh). Cleared before anything of the new run is written, so a refused delete
        # (DeleteFailed) leaves no half-made run behind.
        for key in (layout.job_failed_key(job_id), layout.cancel_key(job_id), layout.notice_key(job_id)):
            self.storage.delete_prefix(bucket, key)
        put_json(self.storage, bucket, layout.run_plan_key(job_id, run), [segment.to_dict() for segment in missing])
        started_at = datetime.fromtimestamp(self.clock(), UTC).isoformat()
        segments = tuple(segment.index for segment in missing)
        record_run(self.storage, bucket, job_id, RunRecord(run, segments, started_at))
        payload = {
            **first,
            "job": {**first["job"], "run": run},
            "plan": {"bucket": bucket, "key": layout.run_plan_key(job_id, run)},
        }
        try:
            self.orchestrator.start(self.resources.state_machine_arn, name, payload)
        except Exception:
            self._restore_run(job_id, facts.run)
            raise
        shown = ", ".join(str(segment.index) for segment in missing[:20]) + ("…" if len(missing) > 20 else "")
        what = (
            f"rendering {len(missing)} of {len(plan)} segments ({shown})"
            if missing
            else "all segments are valid; merging again"
        )
        return f"job {job_id} retried as run {run} (execution {name}): {what}"

    # ------------------------------------------------------------------ internals
    def _json(self, key: str) -> Any:
        try:
            return get_json(self.storage, self.resources.work_bucket, key)
        except ObjectMissing:
            return None

    @property
    def states(self) -> JobStates:
        """The job-state read model over this farm (`fusionfleet.jobs.state`)."""
        return JobStates(self.storage, self.orchestrator, self.resources.work_bucket, self.resources.state_machine_arn)

    def _facts(self, job_id: str) -> JobFacts:
        return self.states.facts(job_id)

    def _listing(self, job_id: str) -> SegmentFiles:
        return self.states.segment_files(job_id)

    def _summary(self, facts: JobFacts, listing: SegmentFiles | None = None) -> JobSummary:
        state = facts.state
        context = facts.context
        if context is None:
            rejection = facts.rejection or {}
            manifest = rejection.get("manifest") or {}
            return JobSummary(
                job_id=facts.job_id,
                name=layout.manifest_name(str(manifest.get("key", facts.job_id))),
                state=state,
                priority="",
                segments_done=0,
                segments_failed=0,
                segments_total=0,
                submitted_at=self._rejected_at(facts.job_id),
                output=None,
                reason=facts.reason,
            )
        listing = listing or self._listing(facts.job_id)
        return JobSummary(
            job_id=facts.job_id,
            name=layout.manifest_name(context.manifest.key),
            state=state,
            priority=context.priority,
            segments_done=len(listing.done),
            segments_failed=len(listing.failed),
            segments_total=context.segment_count,
            submitted_at=_parse_time(context.submitted_at),
            output=f"s3://{context.output.bucket}/{context.output.key}" if state == "SUCCEEDED" else None,
            reason=facts.reason,
        )

    def _rejected_at(self, job_id: str) -> datetime | None:
        record = self._json(layout.rejected_index_key(job_id))
        return _parse_time(record.get("rejected_at")) if isinstance(record, dict) else None

    def _candidates(self) -> list[tuple[str, float, str]]:
        """(job id, when it started, the status of its newest run) for every job, newest first."""
        runs: dict[str, list[tuple[int, float, str]]] = {}  # job → [(run, started, status)]
        states = self.states
        for status in ("RUNNING", *TERMINAL):
            for execution in self.orchestrator.list_executions(self.resources.state_machine_arn, status):
                job_id, run = states.job_of(execution)
                started = execution.started.timestamp() if execution.started else 0.0
                runs.setdefault(job_id, []).append((run, started, execution.status))
        found = []
        for job_id, items in runs.items():
            newest = max(items)
            first_start = min((started for _run, started, _status in items if started), default=0.0)
            found.append((job_id, first_start, newest[2]))
        for key in self.storage.list_keys(self.resources.work_bucket, layout.REJECTED_INDEX_PREFIX):
            rejected = layout.parse_rejected_index_key(key)
            if rejected is None or rejected in runs:
                continue
            at = self._rejected_at(rejected)
            found.append((rejected, at.timestamp() if at else 0.0, "REJECTED"))
        return sorted(found, key=lambda item: item[1], reverse=True)

    def _plan(self, job_id: str) -> list[Segment]:
        items = self._json(layout.plan_key(job_id)) or []
        return [Segment.from_dict(item) for item in items]

    def _attempts(self, job_id: str, listing: SegmentFiles) -> list[SegmentAttempt]:
        """Every attempt record, oldest first per segment; a segment without any (a job rendered before
        attempts were recorded) shows its segment record as its one attempt."""
        stored: list[SegmentAttempt] = []
        for _segment, _run, _attempt, key in listing.attempts:
            try:
                stored.append(SegmentAttempt.model_validate(get_json(self.storage, self.resources.work_bucket, key)))
            except (ObjectMissing, ValueError):
                continue
        with_attempts = {record.index for record in stored}
        for index in sorted(listing.records - with_attempts):
            record = self._segment_record(job_id, index)
            if record is not None:
                stored.append(
                    SegmentAttempt(
                        job_id=job_id, index=index, attempt=record.attempt, worker=record.worker, status=record.status,
                        started_at=record.started_at, finished_at=record.finished_at, engine_s=record.engine_s,
                        frames=record.frames, error=record.error, reason=record.reason,
                    )
                )  # fmt: skip
        return sorted(stored, key=lambda record: (record.index, record.run, record.started_at, record.copy_number))

    def _segment_record(self, job_id: str, index: int) -> SegmentRecord | None:
        raw = self._json(layout.segment_record_key(job_id, index))
        try:
            return SegmentRecord.model_validate(raw) if raw is not None else None
        except ValueError:
            return None

    def _segment_view(
        self, segment: Segment, facts: JobFacts, state: str, listing: SegmentFiles, stored: list[SegmentAttempt]
    ) -> SegmentView:
        mine = [record for record in stored if record.index == segment.index]
        latest = mine[-1] if mine else None
        worker, attempt = (latest.worker, len(mine)) if latest else ("", 0)
        if segment.index in listing.done:
            view_state = "done"
            done = [record for record in mine if record.status == "succeeded"]
            if done:
                worker, attempt = done[-1].worker, mine.index(done[-1]) + 1
        elif state == "RUNNING" and latest is not None and latest.status == "running" and latest.run == facts.run.run:
            view_state = "running"
        elif (
            state == "RUNNING"
            and facts.run.run > 0
            and segment.index in facts.run.segments
            and (latest is None or latest.run < facts.run.run)
        ):
            view_state = "pending"  # the retry has not reached it yet
        elif segment.index in listing.failed or (
            latest is not None and latest.status == "failed" and state != "RUNNING"
        ):
            view_state = "failed"
        else:
            view_state = "pending"
        return SegmentView(segment.index, segment.start_frame, segment.end_frame, view_state, worker, attempt)

    def _timings(self, facts: JobFacts, stored: list[SegmentAttempt]) -> dict[str, Any]:
        execution = facts.execution
        timings: dict[str, Any] = {}
        if execution is not None and execution.output and isinstance(execution.output.get("timings"), dict):
            timings.update(execution.output["timings"])
        if facts.context is not None:
            timings.setdefault("submitted_at", facts.context.submitted_at)
        if execution is not None:
            if execution.started:
                timings.setdefault("started_at", execution.started.isoformat())
            if execution.stopped:
                timings.setdefault("stopped_at", execution.stopped.isoformat())
        ended = [record for record in stored if record.finished_at]
        timings.setdefault("engine_s", round(sum(r.engine_s for r in ended if r.status == "succeeded"), 3))
        timings.setdefault("worker_s", round(sum(r.finished_at - r.started_at for r in ended), 3))
        if ended:
            timings.setdefault(
                "render_s", round(max(r.finished_at for r in ended) - min(r.started_at for r in stored), 3)
            )
        timings["attempts"] = len(stored)
        timings["run"] = facts.run.run
        return timings

    def _cost(self, facts: JobFacts, stored: list[SegmentAttempt]) -> dict[str, Any] | None:
        execution = facts.execution
        if execution is not None and execution.output and isinstance(execution.output.get("cost"), dict):
            return {**execution.output["cost"], "final": True}
        ended = [record for record in stored if record.finished_at]
        if not ended:
            return None
        engine_s = sum(record.engine_s for record in ended if record.status == "succeeded")
        billed_s = sum(record.finished_at - record.started_at for record in ended)
        return {
            "engine_gpu_s": round(engine_s, 3),
            "billed_gpu_s": round(billed_s, 3),
            "gpu_hourly_price": DEFAULT_GPU_HOURLY_PRICE,
            "estimated_usd": round(billed_s / 3600 * DEFAULT_GPU_HOURLY_PRICE, 6),
            "final": False,
        }

    def _preview(self, job_id: str) -> str | None:
        try:
            self.storage.head(self.resources.work_bucket, layout.frame_preview_key(job_id))
        except ObjectMissing:
            return None
        return layout.frame_preview_key(job_id)

    def _valid(self, job_id: str, index: int) -> bool:
        """A segment's output is valid when its record says succeeded and the segment object exists."""
        record = self._segment_record(job_id, index)
        if record is None or record.status != "succeeded":
            return False
        try:
            # The record names the copy that won (a straggler's backup writes beside the segment's key).
            self.storage.head(self.resources.work_bucket, record.key or layout.segment_key(job_id, index))
        except ObjectMissing:
            return False
        return True

    def _first_input(self, job_id: str) -> dict[str, Any] | None:
        arn = execution_arn(self.resources.state_machine_arn, execution_name(job_id, 0))
        try:
            return self.orchestrator.describe(arn).input
        except ExecutionMissing:
            return None

    def _restore_run(self, job_id: str, previous: RunRecord) -> None:
        bucket = self.resources.work_bucket
        if previous.run == 0:
            self.storage.delete_prefix(bucket, layout.run_key(job_id))
            return
        record_run(self.storage, bucket, job_id, previous)

    def _stop(self, arn: str) -> None:
        try:
            self.orchestrator.stop(arn, CANCEL_ERROR, CANCEL_REASON)
        except ExecutionMissing as error:
            raise OperationRefused(f"the execution {arn} no longer exists") from error

    def _claim_notice(self, job_id: str, now: datetime) -> bool:
        """The watchdog's conditional create: whoever creates the notice record publishes the notice."""
        record = {"claimed_at": now.isoformat(), "published": False, "reason": CANCEL_REASON, "by": "cancel"}
        key = layout.notice_key(job_id)
        if self.storage.create(self.resources.work_bucket, key, json.dumps(record, sort_keys=True).encode()):
            return True
        existing = self._json(key)
        if not isinstance(existing, dict) or existing.get("published") or existing.get("by") != "cancel":
            return False
        # A cancel that claimed and died before publishing: finish it, once the claim is old enough.
        claimed = _parse_time(existing.get("claimed_at"))
        return claimed is None or (now - claimed).total_seconds() > RECLAIM_S

    def _publish_prepared(self, job_id: str, arn: str) -> None:
        """Publishes the notice the state machine built (when it built one) and refuses the cancel."""
        built = self.orchestrator.state_output(arn, NOTICE_STATES)
        notice = built.get("notice") if built else None
        if not isinstance(notice, dict) or notice.get("status") not in ("succeeded", "failed"):
            return  # it had built none: the cancel's own notice is the one
        self.storage.delete_prefix(self.resources.work_bucket, layout.cancel_key(job_id))
        status = str(notice["status"])
        self.notifier.publish(
            self.resources.topic_arn, notice_subject(job_id, status), {**notice, "notified_by": "cancel"}
        )
        self._mark_notice(job_id, published_by="cancel", reason=f"the job ended {status} as it was cancelled")
        raise OperationRefused(f"job {job_id} ended ({status}) as it was cancelled; its {status} notice was sent")

    def _mark_notice(self, job_id: str, published_by: str, reason: str) -> None:
        put_json(
            self.storage,
            self.resources.work_bucket,
            layout.notice_key(job_id),
            {
                "claimed_at": datetime.fromtimestamp(self.clock(), UTC).isoformat(),
                "published": True,
                "published_by": published_by,
                "reason": reason,
            },
        )


def _numbered(stored: list[SegmentAttempt]) -> list[AttemptRecord]:
    """Attempt records as people read them: numbered 1, 2, … per segment across every run."""
    numbered: list[AttemptRecord] = []
    counts: dict[int, int] = {}
    for record in stored:
        counts[record.index] = counts.get(record.index, 0) + 1
        numbered.append(
            AttemptRecord(
                segment=record.index,
                attempt=counts[record.index],
                worker=record.worker,
                status=record.status,
                started_at=record.started_at,
                finished_at=record.finished_at,
                engine_s=record.engine_s,
                error=record.error,
                reason=record.reason,
                copy_number=record.copy_number,
            )
        )
    return numbered


def _could_be(hint: str, state: str) -> bool:
    """Whether a job whose newest run's execution is `hint` can be in `state` (a cancelled job's execution
    is ABORTED, or still RUNNING while it stops)."""
    if state == "CANCELLED":
        return hint in ("ABORTED", "RUNNING")
    return hint == state


def _why_not_retry(state: str) -> str:
    return {
        "RUNNING": "it is still running (cancel it first, or wait for it to end)",
        "SUCCEEDED": "it succeeded, there is nothing to retry",
        "PENDING": "it has not started yet",
        "REJECTED": "it was rejected: fix the manifest or media and upload the manifest again",
    }.get(state, "only a failed, cancelled, timed-out or aborted job can be retried")


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
