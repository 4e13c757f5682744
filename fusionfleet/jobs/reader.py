"""The read model: every view of a job the CLI, the dashboards, the tenant API and the watchdog render.

Everything comes from what the farm already keeps (no database of our own): Step Functions executions
(one per run of a job, `fusionfleet.jobs.runs`) and the records in the work bucket (job, plan, segment
and attempt records, the cancel marker, the notice record, the job-failed marker), read through
`fusionfleet.jobs.facts` and shaped by `fusionfleet.jobs.views`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from fusionfleet import batch_layout, layout, tenant_layout
from fusionfleet.adapters.orchestrator import LISTED_STATUSES, Orchestrator
from fusionfleet.adapters.storage import Storage, get_json
from fusionfleet.errors import JobNotFound, ObjectMissing, OperationRefused
from fusionfleet.facefusion.content_analysis import AnalysisProgress
from fusionfleet.fleet.tenants import notice_tenant
from fusionfleet.jobs.batch_views import listed_batch
from fusionfleet.jobs.batches import BatchRecord
from fusionfleet.jobs.facts import JobFacts, JobRecords, SegmentFiles
from fusionfleet.jobs.ids import batch_of_item, tenant_of_job
from fusionfleet.jobs.runs import is_cancelled
from fusionfleet.jobs.states import JobState, could_be, job_state, parse_state
from fusionfleet.jobs.views import (
    AttemptView,
    JobDetail,
    JobView,
    cost,
    job_view,
    numbered,
    parse_time,
    segment_view,
    timings,
)
from fusionfleet.messages import SegmentAttempt
from fusionfleet.webhooks.records import DeliveryRecord, deliveries

DEFAULT_LIST_LIMIT = 20


class JobReader:
    """Reads jobs for people: one job's view or detail, its attempts and preview, and recent jobs."""

    def __init__(
        self, storage: Storage, orchestrator: Orchestrator, work_bucket: str, state_machine_arn: str,
        clock: Callable[[], float] = time.time,
    ) -> None:  # fmt: skip
        self.records = JobRecords(storage, orchestrator, work_bucket, state_machine_arn)
        self._clock = clock

    def view(self, job_id: str, known: bool = True, in_flight: bool = False) -> JobView:
        """One job's view. `known=False`: a job not yet sliced is PENDING rather than JobNotFound;
        `in_flight`: ask the orchestrator how many of its segments are in flight (one call more)."""
        facts = self.records.facts(job_id, known)
        view = self._view(facts, in_flight=in_flight)
        if view.state is JobState.RUNNING and not (view.segments.done or view.segments.running):
            return replace(view, analysis=self._analysis(facts))
        return view

    def detail(self, job_id: str) -> JobDetail:
        facts = self.records.facts(job_id)
        files = self.records.segment_files(job_id) if facts.context else SegmentFiles()
        view = self._view(facts, files)
        if facts.context is None:
            return JobDetail(view, [], [], {}, None)
        stored = self._attempts(job_id, files)
        plan = self.records.plan(job_id)
        return JobDetail(
            job=view,
            segments=[segment_view(segment, facts, files, stored) for segment in plan],
            attempts=numbered(stored),
            timings=timings(facts, stored),
            preview_key=self._preview_key(job_id),
            cost=cost(facts, stored, self._clock()),
            deliveries=[record.view() for record in deliveries(self.records.storage, self.records.bucket, job_id)],
        )

    def deliveries(self, job_id: str) -> list[DeliveryRecord]:
        """The job's webhook events and every attempt to deliver each, in the order they were sent."""
        self.records.facts(job_id)  # an unknown job is JobNotFound
        return deliveries(self.records.storage, self.records.bucket, job_id)

    def logs(self, job_id: str, segment: int | None = None) -> list[AttemptView]:
        """What each attempt of each segment did (or of one segment), in order."""
        facts = self.records.facts(job_id)
        if facts.context is None:
            return []
        records = numbered(self._attempts(job_id, self.records.segment_files(job_id)))
        return [record for record in records if segment is None or record.segment == segment]

    def preview(self, job_id: str) -> bytes | None:
        """The latest rendered frame of the job as a small JPEG, or None before its first chunk."""
        try:
            return self.records.storage.get_bytes(self.records.bucket, layout.frame_preview_key(job_id))
        except ObjectMissing:
            self.records.facts(job_id)  # an unknown job is JobNotFound, not "no preview yet"
            return None

    def list_jobs(
        self, state: JobState | str | None = None, limit: int = DEFAULT_LIST_LIMIT, tenant: str | None = None
    ) -> list[JobView]:
        """Recent jobs, newest first; `state` keeps only jobs in that state, `tenant` only its jobs ("-": none's)."""
        wanted = None
        if state is not None:
            wanted = parse_state(str(state))
            if wanted is None:
                raise OperationRefused(f"unknown state {state!r}: one of {', '.join(JobState)}")
        views: list[JobView] = []
        candidates, batches = self._candidates()
        for job_id, _started, hint in candidates:
            if len(views) >= limit:
                break
            if tenant is not None and notice_tenant(tenant_of_job(job_id)) != tenant:
                continue
            if job_id in batches:
                view = self._listed_batch(job_id, batches[job_id])
                if view is not None and (wanted is None or view.state is wanted):
                    views.append(view)
                continue
            if wanted is not None and not could_be(hint, wanted):
                continue
            try:
                view = self._view(self.records.facts(job_id))
            except JobNotFound:
                continue
            if wanted is None or view.state is wanted:
                views.append(view)
        return views

    def batch_record(self, batch_id: str) -> BatchRecord | None:
        raw = self.records.json(batch_layout.batch_key(batch_id))
        return BatchRecord.model_validate(raw) if raw is not None else None

    def view_of(self, facts: JobFacts, segments: bool = True) -> JobView:
        """A job's view from facts already read; `segments=False` skips listing its segment files."""
        return self._view(facts, None if segments else SegmentFiles())

    # ------------------------------------------------------------------ internals
    def _view(self, facts: JobFacts, files: SegmentFiles | None = None, in_flight: bool = False) -> JobView:
        if facts.context is not None and files is None:
            files = self.records.segment_files(facts.job_id)
        submitted = self._rejected_at(facts.job_id) if facts.rejection is not None else None
        return job_view(facts, files, self.records.in_flight(facts) if in_flight else 0, submitted)

    def _analysis(self, facts: JobFacts) -> AnalysisProgress | None:
        """How far the job's content analysis has read, while it runs (None before it starts, or with none)."""
        verdict = facts.context.content_analysis if facts.context is not None else None
        if verdict is None or self.records.json(verdict.key) is not None:
            return None  # none, or made already: the segments run
        raw = self.records.json(layout.content_analysis_progress_key(facts.job_id))
        return AnalysisProgress.model_validate(raw) if isinstance(raw, dict) else None

    def _rejected_at(self, job_id: str) -> datetime | None:
        record = self.records.json(layout.rejected_index_key(job_id))
        return parse_time(record.get("rejected_at")) if isinstance(record, dict) else None

    def _candidates(self) -> tuple[list[tuple[str, float, str]], dict[str, dict[str, JobState]]]:
        """(job id, when it started, the status of its newest run) for every job and batch, newest first,
        and for each batch its items' states as their newest runs say (a batch is one row)."""
        records = self.records
        runs: dict[str, list[tuple[int, float, str]]] = {}  # job → [(run, started, status)]
        for status in LISTED_STATUSES:
            for execution in records.orchestrator.list_executions(records.state_machine_arn, status):
                job_id, run = records.job_of(execution)
                started = execution.started.timestamp() if execution.started else 0.0
                runs.setdefault(job_id, []).append((run, started, execution.status))
        found: dict[str, tuple[str, float, str]] = {}
        batches: dict[str, dict[str, JobState]] = {}

        def add(job_id: str, started: float, status: str) -> None:
            item = batch_of_item(job_id)
            if item is not None:
                batch = batches.setdefault(item[0], {})
                batch[job_id] = job_state(
                    status if status != JobState.REJECTED else None, status == JobState.REJECTED, False
                )
                job_id = item[0]
            earlier = found.get(job_id)
            found[job_id] = (job_id, min(started, earlier[1]) if earlier and earlier[1] else started, status)

        for job_id, items in runs.items():
            newest = max(items)
            add(job_id, min((started for _run, started, _status in items if started), default=0.0), newest[2])
        for key in records.storage.list_keys(records.bucket, tenant_layout.WAITING_PREFIX):
            queued = tenant_layout.parse_waiting_index_key(key)
            if queued is None or queued[2] in runs:
                continue  # a held job is found by its execution
            add(queued[2], queued[1] // 10**13 * 1.0, JobState.WAITING.value)
        for key in records.storage.list_keys(records.bucket, layout.REJECTED_INDEX_PREFIX):
            rejected = layout.parse_rejected_index_key(key)
            if rejected is None or rejected in runs:
                continue
            at = self._rejected_at(rejected)
            add(rejected, at.timestamp() if at else 0.0, JobState.REJECTED.value)
        for key in records.storage.list_keys(records.bucket, batch_layout.OPEN_BATCHES_PREFIX):
            batch = batch_layout.parse_open_batch_key(key)
            if batch is not None and batch not in found:
                batches.setdefault(batch, {})
                found[batch] = (batch, time.time(), JobState.PENDING.value)
        return sorted(found.values(), key=lambda item: item[1], reverse=True), batches

    def _listed_batch(self, batch_id: str, newest: dict[str, JobState]) -> JobView | None:
        record = self.batch_record(batch_id)
        if record is None:
            return None
        cancelled = is_cancelled(self.records.storage, self.records.bucket, batch_id)
        return listed_batch(record, newest, cancelled, None)

    def _attempts(self, job_id: str, files: SegmentFiles) -> list[SegmentAttempt]:
        """Every attempt record, oldest first per segment; a segment without any (a job rendered before
        attempts were recorded) shows its segment record as its one attempt."""
        stored: list[SegmentAttempt] = []
        storage, bucket = self.records.storage, self.records.bucket
        for _segment, _run, _attempt, key in files.attempts:
            try:
                stored.append(SegmentAttempt.model_validate(get_json(storage, bucket, key)))
            except (ObjectMissing, ValueError):
                continue
        with_attempts = {record.index for record in stored}
        for index in sorted(files.records - with_attempts):
            record = self.records.segment_record(job_id, index)
            if record is not None:
                stored.append(
                    SegmentAttempt(
                        job_id=job_id, index=index, attempt=record.attempt, worker=record.worker, status=record.status,
                        started_at=record.started_at, finished_at=record.finished_at, engine_s=record.engine_s,
                        frames=record.frames, error=record.error, reason=record.reason,
                    )
                )  # fmt: skip
        return sorted(stored, key=lambda record: (record.index, record.run, record.started_at, record.copy_number))

    def _preview_key(self, job_id: str) -> str | None:
        try:
            self.records.storage.head(self.records.bucket, layout.frame_preview_key(job_id))
        except ObjectMissing:
            return None
        return layout.frame_preview_key(job_id)
