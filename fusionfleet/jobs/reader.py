"""The read model: every view of a job the CLI, the dashboards, the tenant API and the watchdog render.

Everything comes from what the farm already keeps (no database of our own): Step Functions executions
(one per run of a job, `fusionfleet.jobs.runs`) and the records in the work bucket (job, plan, segment
and attempt records, the cancel marker, the notice record, the job-failed marker), read through
`fusionfleet.jobs.facts` and shaped by `fusionfleet.jobs.views`.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import Any

from fusionfleet import batch_layout, index_layout, layout, tenant_layout
from fusionfleet.adapters.orchestrator import LISTED_STATUSES, ExecutionMissing, Orchestrator
from fusionfleet.adapters.storage import Storage, get_json
from fusionfleet.errors import BadRequest, JobNotFound, ObjectMissing, OperationRefused
from fusionfleet.facefusion.content_analysis import AnalysisProgress
from fusionfleet.fleet.tenants import notice_tenant
from fusionfleet.jobs import summary
from fusionfleet.jobs.batch_views import listed_batch, pending_batch
from fusionfleet.jobs.batches import BatchRecord
from fusionfleet.jobs.facts import JobFacts, JobRecords, SegmentFiles
from fusionfleet.jobs.final_notice import told_by_itself
from fusionfleet.jobs.ids import batch_of_item, tenant_of_job
from fusionfleet.jobs.runs import is_cancelled
from fusionfleet.jobs.states import JobState, could_be, job_state, parse_state
from fusionfleet.jobs.summary import EndedView, JobSummary
from fusionfleet.jobs.views import (
    AttemptView,
    JobDetail,
    JobView,
    cost,
    job_view,
    numbered,
    parse_time,
    segment_view,
    summary_segment,
    summary_view,
    timings,
)
from fusionfleet.messages import SegmentAttempt
from fusionfleet.webhooks.records import DeliveryRecord, deliveries

DEFAULT_LIST_LIMIT = 20
# Attempt records read at once when a job's every attempt is needed: botocore's default connection pool.
ATTEMPT_READERS = 10
# The most attempt records a read prices (about a second); more: the notice's follower's (issue 45).
PRICED_IN_A_READ = 200
# Pages of a job's detail: segments shown, and attempt records read, per request.
DEFAULT_SEGMENT_PAGE = 100
DEFAULT_ATTEMPT_PAGE = 10
# Keys one listing reads: the job index's (one request for up to 1,000 jobs), a job's segment files'.
INDEX_SCAN = 1000
ATTEMPT_SCAN = 1000


def encode_cursor(key: str) -> str:
    """An opaque `next`: the last key a page read (a page starts after it)."""
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, prefix: str) -> str:
    try:
        key = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        key = ""
    if not key.startswith(prefix):
        raise BadRequest("bad cursor", ("next must be the cursor a page of this listing gave",))
    return key


def job_result_json(facts: JobFacts) -> dict[str, Any] | None:
    """What of an ended execution's output a summary keeps: the merge's result."""
    output = facts.execution.output if facts.execution is not None else None
    if not output:
        return None
    return {key: output[key] for key in ("output", "frames", "duration_s", "timings", "cost") if key in output}


def _before_segment(job_id: str, index: int) -> str:
    """The cursor of an attempts page that starts at segment `index` (its files sort after its stem)."""
    return encode_cursor(layout.attempts_prefix(job_id, index).removesuffix(".attempts/"))


def settled(facts: JobFacts) -> bool:
    """Whether the job's view can no longer change but by a retry (which starts a new run): its execution
    ended, and (unless it succeeded) its final notice, whose reason the view shows, has gone out."""
    if facts.execution is None or not facts.execution.finished or not facts.state.ended:
        return False
    execution, notice = facts.execution, facts.notice
    if facts.state is JobState.SUCCEEDED:
        return True
    return notice is not None and (notice.published or told_by_itself(execution.status, execution.error))


def _wanted(state: JobState | str | None) -> JobState | None:
    if state is None:
        return None
    wanted = parse_state(str(state))
    if wanted is None:
        raise OperationRefused(f"unknown state {state!r}: one of {', '.join(JobState)}")
    return wanted


class JobReader:
    """Reads jobs for people: one job's view or detail, its attempts and preview, and recent jobs."""

    def __init__(
        self, storage: Storage, orchestrator: Orchestrator, work_bucket: str, state_machine_arn: str,
        clock: Callable[[], float] = time.time,
    ) -> None:  # fmt: skip
        self.records = JobRecords(storage, orchestrator, work_bucket, state_machine_arn)
        self._clock = clock

    def view(self, job_id: str, known: bool = True, in_flight: bool = False) -> JobView:
        """One job's view (PENDING from its acceptance before the slicer took it; JobNotFound for an id
        nothing knows). `known=False`: a job with an execution and no job record is read from that alone;
        `in_flight`: ask the orchestrator how many of its segments are in flight (one call more)."""
        if not in_flight:
            fast = self._fast(job_id)
            if fast is not None and not (fast.state is JobState.RUNNING and not fast.segments.done):
                return fast
        facts = self.records.facts(job_id, known)
        if facts.context is None and facts.rejection is None and facts.accepted is None and not facts.execution:
            raise JobNotFound(f"no job {job_id!r} (no record, no accepted manifest and no execution)")
        view = self._view(facts, in_flight=in_flight)
        if view.state is JobState.RUNNING and not (view.segments.done or view.segments.running):
            return replace(view, analysis=self._analysis(facts))
        return view

    def detail_page(
        self, job_id: str, segments_from: int = 0, limit: int = DEFAULT_SEGMENT_PAGE
    ) -> tuple[JobDetail, int | None]:
        """The job and one page of its segments (from segment `segments_from`, at most `limit`), in a
        bounded number of reads: its summary, its plan, its preview and webhook records. A job without
        a summary (one from before summaries) gets the full `detail`. Returns the detail and the first
        segment of the next page (None on the last). Its attempts are the first page of `attempts_page`;
        its cost once the run ended (the merge's figure, or its attempts priced once: `_ended_cost`);
        while it runs, none (that needs every attempt: `detail`)."""
        found = summary.read(self.records.storage, self.records.bucket, job_id)
        if found is None:
            full = self.detail(job_id)
            segments = [s for s in full.segments if s.index >= segments_from]
            more = segments[limit].index if len(segments) > limit else None
            return replace(full, segments=segments[:limit]), more
        view = self._fast(job_id, found) or self._full_view(job_id, found)
        if found.ended_view is None and view.state.ended:
            found = summary.read(self.records.storage, self.records.bucket, job_id) or found  # its end, recorded now
        plan = [segment for segment in self.records.plan(job_id) if segment.index >= segments_from]
        page = plan[:limit]
        more = plan[limit].index if len(plan) > limit else None
        storage, bucket = self.records.storage, self.records.bucket
        detail = JobDetail(
            job=view,
            segments=[summary_segment(segment, found) for segment in page],
            attempts=self.attempts_page(job_id, _before_segment(job_id, page[0].index) if page else "")[0],
            timings={"submitted_at": found.submitted_at, "run": found.run,
                     "engine_s": round(sum(mark.e for mark in found.segments.values()), 3)},
            preview_key=self._preview_key(job_id),
            cost=found.ended_cost,  # known once the run ended (a running job's: `attempts_page`)
            deliveries=[record.view() for record in deliveries(storage, bucket, job_id)],
        )  # fmt: skip
        return detail, more

    def attempts_page(
        self, job_id: str, after: str = "", limit: int = DEFAULT_ATTEMPT_PAGE
    ) -> tuple[list[AttemptView], str | None]:
        """At most `limit` attempt records of the job, in segment order, after the cursor `after`: one
        listing and `limit` reads. Numbered within the page's segments as `logs` numbers them."""
        storage, bucket = self.records.storage, self.records.bucket
        prefix = layout.segments_prefix(job_id)
        start = decode_cursor(after, prefix) if after else ""
        found: list[SegmentAttempt] = []
        cursor, exhausted = start, False
        while len(found) < limit and not exhausted:
            keys = storage.list_after(bucket, prefix, cursor, ATTEMPT_SCAN)
            exhausted = len(keys) < ATTEMPT_SCAN
            for key in keys:
                cursor = key
                if layout.parse_attempt_record_key(key) is None:
                    continue
                try:
                    found.append(SegmentAttempt.model_validate(get_json(storage, bucket, key)))
                except (ObjectMissing, ValueError):
                    continue
                if len(found) >= limit:
                    exhausted = exhausted and key == keys[-1]
                    break
        if not found and not start:
            self.records.facts(job_id)  # an unknown job is JobNotFound, not a job without attempts
        ordered = sorted(found, key=lambda r: (r.index, r.run, r.started_at, r.copy_number))
        return numbered(ordered), None if exhausted else encode_cursor(cursor)

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
        return self.list_page(state, limit, tenant)[0]

    def list_page(
        self, state: JobState | str | None = None, limit: int = DEFAULT_LIST_LIMIT, tenant: str | None = None,
        after: str = "", unindexed: bool = True,
    ) -> tuple[list[JobView], str | None]:  # fmt: skip
        """One page of `list_jobs` from the job index, after the cursor `after` (a page's `next`): one
        listing and a read of each job's summary, the full read only where a summary cannot be believed.
        Returns the page and the cursor of the next (None on the last). A farm with no job index (its
        jobs all from before it) is listed the old way, as one page (`unindexed`: the tenant API's role
        may not list executions, and finds such jobs from its own records)."""
        wanted = _wanted(state)
        storage, bucket = self.records.storage, self.records.bucket
        cursor = decode_cursor(after, index_layout.JOB_INDEX_PREFIX) if after else ""
        keys = storage.list_after(bucket, index_layout.JOB_INDEX_PREFIX, cursor, INDEX_SCAN)
        if not keys and not cursor:
            return (self._list_unindexed(wanted, limit, tenant) if unindexed else []), None
        views: list[JobView] = []
        seen: set[str] = set()  # a job started again after its records expired has two entries
        for key in keys:
            job_id = index_layout.parse_job_index_key(key)
            cursor = key
            if (
                job_id is None
                or job_id in seen
                or (tenant is not None and notice_tenant(tenant_of_job(job_id)) != tenant)
            ):
                continue
            seen.add(job_id)
            try:
                view = self._fast(job_id) or self._indexed_batch(job_id) or self._full_view(job_id)
            except JobNotFound:
                continue
            if wanted is None or view.state is wanted:
                views.append(view)
                if len(views) >= limit:
                    break
        last = len(keys) < INDEX_SCAN and (not keys or cursor == keys[-1])
        return views, None if last else encode_cursor(cursor)

    def indexed_jobs(self, tenant: str | None = None) -> list[str]:
        """The ids of the first INDEX_SCAN jobs in the job index (of `tenant`), newest first: one listing."""
        keys = self.records.storage.list_after(self.records.bucket, index_layout.JOB_INDEX_PREFIX, "", INDEX_SCAN)
        found = [job for key in keys if (job := index_layout.parse_job_index_key(key)) is not None]
        return [job for job in found if tenant is None or notice_tenant(tenant_of_job(job)) == tenant]

    def _list_unindexed(self, wanted: JobState | None, limit: int, tenant: str | None) -> list[JobView]:
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

    def _indexed_batch(self, batch_id: str) -> JobView | None:
        """A batch's row from its record, its started items (one listing of its claims) and each started
        item's summary (a read each; an ended item's view is recorded in its summary by the first read
        that finds it ended). None when `batch_id` is no batch."""
        record = self.batch_record(batch_id)
        if record is None:
            return None
        storage, bucket = self.records.storage, self.records.bucket
        newest: dict[str, JobState] = {}
        for key in storage.list_keys(bucket, batch_layout.batch_items_prefix(batch_id)):
            claim = batch_layout.parse_batch_item_claim_key(key)
            if claim is None:
                continue
            item = record.item_id(claim[1])
            try:
                newest[item] = (self._fast(item) or self._full_view(item)).state
            except JobNotFound:
                continue  # claimed, not prepared yet: it shows as not started
        return listed_batch(record, newest, is_cancelled(storage, bucket, batch_id), None)

    def batch_record(self, batch_id: str) -> BatchRecord | None:
        raw = self.records.json(batch_layout.batch_key(batch_id))
        return BatchRecord.model_validate(raw) if raw is not None else None

    def view_of(self, facts: JobFacts, segments: bool = True) -> JobView:
        """A job's view from facts already read; `segments=False` skips listing its segment files."""
        return self._view(facts, None if segments else SegmentFiles())

    # ------------------------------------------------------------------ internals
    def _fast(self, job_id: str, found: JobSummary | None = None) -> JobView | None:
        """The job's view from its summary where the summary can be believed (`fusionfleet.jobs.summary`):
        an ended run's recorded view, or a running execution's counts; None: read it in full."""
        found = found or summary.read(self.records.storage, self.records.bucket, job_id)
        if found is None:
            return None
        ended_view = found.ended_view
        if ended_view is not None:
            return summary_view(found, JobState(ended_view.state), ended_view.reason, ended_view.result)
        if found.cancelled:
            return None
        try:
            execution = self.records.orchestrator.describe(self.records.execution_arn(job_id, found.run))
        except ExecutionMissing:
            return None  # waiting for its tenant's turn, or its start is under way
        if execution.status != JobState.RUNNING.value:
            return None  # ended, and nobody recorded how yet
        return summary_view(found, JobState.RUNNING, found.doomed, None)

    def _full_view(self, job_id: str, found: JobSummary | None = None) -> JobView:
        """The view from the job's facts; its segment counts from its summary where it has one (no
        listing of a long job's files). An ended run's view is recorded in the summary for the next read."""
        facts = self.records.facts(job_id)
        if facts.accepted is not None and facts.accepted.batch:
            return pending_batch(facts.accepted).batch  # accepted, not yet opened: one row, PENDING
        if found is None and facts.context is not None:
            found = summary.read(self.records.storage, self.records.bucket, job_id)
        if found is None or found.run != facts.run.run or not settled(facts):
            files = SegmentFiles(outputs=found.done, records=found.done | found.failed) if found else None
            return self._view(facts, files)
        # Ended, and read in full this once: its counts from its files, and its view recorded for every
        # later read (with any segment mark a writer failed to make).
        files = self.records.segment_files(job_id)
        view = self._view(facts, files)
        result = job_result_json(facts)
        priced = self._ended_cost(facts, files, found, (result or {}).get("cost"))
        record = EndedView(run=facts.run.run, state=view.state.value, reason=view.reason, result=result, cost=priced)
        change = summary.ended(record, files.done, files.failed)
        summary.try_update(self.records.storage, self.records.bucket, job_id, change)
        return view

    def _ended_cost(
        self, facts: JobFacts, files: SegmentFiles, found: JobSummary, merged: Any
    ) -> dict[str, Any] | None:
        """An ended run's cost: the merge's, the notice follower's (fusionfleet.services.job_end), or its few
        attempt records priced here once (then recorded): a failed job of thousands took the API past 29 s."""
        if isinstance(merged, dict):
            return {**merged, "final": True}
        if found.priced is not None and found.priced.run == facts.run.run:
            return found.priced.cost
        if len(files.attempts) > PRICED_IN_A_READ:
            return None  # until the follower's figure (`JobSummary.ended_cost`)
        return cost(facts, self._attempts(facts.job_id, files), self._clock())

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
        storage, bucket = self.records.storage, self.records.bucket

        def read(key: str) -> SegmentAttempt | None:
            try:
                return SegmentAttempt.model_validate(get_json(storage, bucket, key))
            except (ObjectMissing, ValueError):
                return None

        # Read side by side: one after another, a failed job of thousands of attempts took the API
        # function (29 s) past its timeout on the read that first records its end (issue 45).
        keys = [key for _segment, _run, _attempt, key in files.attempts]
        with ThreadPoolExecutor(max_workers=ATTEMPT_READERS, thread_name_prefix="attempts") as pool:
            stored = [found for found in pool.map(read, keys) if found is not None]
            with_attempts = {record.index for record in stored}
            missing = sorted(files.records - with_attempts)
            segment_records = list(pool.map(lambda index: self.records.segment_record(job_id, index), missing))
        for index, record in zip(missing, segment_records, strict=True):
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
