"""What the farm knows about a job, read from what it already keeps, and the state and reason they make.

The one place that derives a job's state and reason (from `fusionfleet.jobs.states`' rules); the read
model (`fusionfleet.jobs.reader`), cancel and retry (`fusionfleet.services.operations`) and the
watchdog read jobs through it, so they cannot disagree:

- a job's facts: its job record or rejection record, its current run (`fusionfleet.jobs.runs`), the
  execution of that run, the cancel marker; while it runs or after it failed, its final notice's
  record (`fusionfleet.jobs.final_notice`) and the run's job-failed marker (`fusionfleet.jobs.loss`);
- its files under `segments/`, sorted into outputs, records and attempt records
  (`fusionfleet.jobs.segment_files`);
- which job an execution belongs to (a retry of a long job id is named with the id cut short).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from fusionfleet import layout
from fusionfleet.adapters.orchestrator import Execution, ExecutionMissing, Orchestrator, Progress, execution_arn
from fusionfleet.adapters.storage import Storage, get_json
from fusionfleet.errors import JobNotFound, ObjectMissing
from fusionfleet.jobs.acceptance import Acceptance, read_acceptance
from fusionfleet.jobs.final_notice import FinalNotices, NoticeRecord, told_by_itself
from fusionfleet.jobs.loss import JobFailedMarker, job_failed
from fusionfleet.jobs.plan import Segment
from fusionfleet.jobs.runs import (
    MAX_EXECUTION_NAME,
    RunRecord,
    current_run,
    execution_name,
    is_cancelled,
    parse_execution_name,
)
from fusionfleet.jobs.segment_files import SegmentFiles as SegmentFiles  # noqa: PLC0414  (re-exported: its home before)
from fusionfleet.jobs.states import CANCEL_REASON, JobState, NoticeStatus, job_state
from fusionfleet.jobs.waiting import WaitingRecord, read_waiting
from fusionfleet.messages import JobContext, SegmentRecord

__all__ = ["JobFacts", "JobRecords", "SegmentFiles"]


@dataclass(frozen=True)
class JobFacts:
    """What the farm knows about one job, gathered once per read."""

    job_id: str
    context: JobContext | None  # the job record; None before the slicer wrote it, or when rejected
    rejection: dict[str, Any] | None
    run: RunRecord
    execution: Execution | None  # the current run's execution; None before it started
    cancelled: bool
    # Read while the job runs or after it failed: what its final notice said, and the current run's
    # job-failed marker (the cause known first).
    notice: NoticeRecord | None = None
    failed: JobFailedMarker | None = None
    # Queued for its tenant's turn, or held by its tenant's budget (fusionfleet.jobs.waiting).
    waiting: WaitingRecord | None = None
    # Its manifest, accepted and not yet sliced (fusionfleet.jobs.acceptance): read only without a job
    # record or a rejection, it is what a PENDING job's view knows of it.
    accepted: Acceptance | None = None

    @property
    def state(self) -> JobState:
        status = self.execution.status if self.execution else None
        return job_state(status, self.rejection is not None, self.cancelled, self.waiting is not None)

    @property
    def reason(self) -> str:
        """Why the job is where it is: the rejection's reason, the cancel, or the job's cause.

        The cause, wherever one is known, is what the job's final notice said (its record), else what
        the state machine's own failure notice said (its execution's cause), else the job-failed
        marker's; only a job nobody has explained is given its execution's error, an orchestration
        artefact such as `States.Timeout`. A running job has a reason only once it is doomed.
        """
        state = self.state
        if state is JobState.REJECTED:
            return str((self.rejection or {}).get("reason", ""))
        if state is JobState.WAITING:
            return self.waiting.reason if self.waiting is not None else ""
        if state is JobState.CANCELLED:
            # A cancel says why in the notice it claimed (an operator, or its tenant's budget).
            return self.notice.reason if self.notice is not None and self.notice.reason else CANCEL_REASON
        execution = self.execution
        if execution is None or state is JobState.SUCCEEDED:
            return ""
        if self.notice is not None and self.notice.reason and self.notice.status != NoticeStatus.SUCCEEDED:
            return self.notice.reason
        if execution.finished and told_by_itself(execution.status, execution.error) and execution.cause:
            return execution.cause
        if self.failed is not None:
            return self.failed.cause
        return "" if state is JobState.RUNNING else execution.cause or execution.error or ""


class JobRecords:
    """Reads jobs' facts, records and files from the work bucket and Step Functions."""

    def __init__(self, storage: Storage, orchestrator: Orchestrator, work_bucket: str, state_machine_arn: str) -> None:
        self._storage = storage
        self._orchestrator = orchestrator
        self._bucket = work_bucket
        self._machine = state_machine_arn

    @property
    def storage(self) -> Storage:
        return self._storage

    @property
    def orchestrator(self) -> Orchestrator:
        return self._orchestrator

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def state_machine_arn(self) -> str:
        return self._machine

    def facts(self, job_id: str, known: bool = True) -> JobFacts:
        """The job's facts. A job with neither a job record nor a rejection is PENDING while its manifest
        is accepted (fusionfleet.jobs.acceptance), else, with `known`, `JobNotFound`; without `known`,
        such a job is read from its execution alone (PENDING until it has one)."""
        raw = self.json(layout.job_key(job_id))
        rejection = None if raw is not None else self.json(layout.rejection_key(job_id))
        accepted = None
        if raw is None and rejection is None:
            accepted = read_acceptance(self._storage, self._bucket, job_id)
            if accepted is None and known:
                raise JobNotFound(
                    f"no job {job_id!r} (no job record, no rejection and no accepted manifest in the work bucket)"
                )
        context = JobContext.model_validate(raw) if raw is not None else None
        run = current_run(self._storage, self._bucket, job_id)
        execution = None
        if rejection is None:
            try:
                execution = self._orchestrator.describe(self.execution_arn(job_id, run.run))
            except ExecutionMissing:
                execution = None
        # A job cancelled while it waited never ran (no execution), or was held (its execution stopped).
        cancelled = (execution is None or execution.status in (JobState.ABORTED, JobState.RUNNING)) and is_cancelled(
            self._storage, self._bucket, job_id
        )
        waiting = read_waiting(self._storage, self._bucket, job_id) if raw is not None else None
        facts = JobFacts(job_id, context, rejection, run, execution, cancelled, waiting=waiting, accepted=accepted)
        if facts.state is JobState.CANCELLED:
            return replace(facts, notice=FinalNotices(self._storage, self._bucket, ()).record(job_id))
        if facts.state not in (JobState.RUNNING, JobState.FAILED, JobState.TIMED_OUT, JobState.ABORTED):
            return facts
        try:
            marker = job_failed(self._storage, self._bucket, job_id)
        except ValueError:
            marker = None  # a marker this reader cannot read names no cause it can give
        notice = FinalNotices(self._storage, self._bucket, ()).record(job_id)
        return replace(facts, notice=notice, failed=marker if marker is not None and marker.run == run.run else None)

    def in_flight(self, facts: JobFacts) -> int:
        """Segments of the current run the orchestrator has sent and not yet heard back from."""
        if facts.execution is None or facts.state is not JobState.RUNNING:
            return 0
        progress = self.run_progress(facts.execution.arn)
        return progress.running if progress is not None else 0

    def run_progress(self, arn: str) -> Progress | None:
        """One execution's own Map Run item counts (a retry's: only the segments it renders)."""
        return self._orchestrator.progress(arn)

    def segment_files(self, job_id: str) -> SegmentFiles:
        return SegmentFiles.of(self._storage.list_keys(self._bucket, layout.segments_prefix(job_id)))

    def plan(self, job_id: str) -> list[Segment]:
        items = self.json(layout.plan_key(job_id)) or []
        return [Segment.from_dict(item) for item in items]

    def segment_record(self, job_id: str, index: int) -> SegmentRecord | None:
        raw = self.json(layout.segment_record_key(job_id, index))
        try:
            return SegmentRecord.model_validate(raw) if raw is not None else None
        except ValueError:
            return None

    def context(self, job_id: str) -> JobContext | None:
        """The job record, or None when the slicer has not written one (or the execution is not a job's)."""
        raw = self.json(layout.job_key(job_id))
        return JobContext.model_validate(raw) if raw is not None else None

    def job_of(self, execution: Execution) -> tuple[str, int]:
        """(job id, run) of an execution; a retry of a job whose id was cut to fit is named in full by its input."""
        job_id, run = parse_execution_name(execution.name)
        if run > 0 and len(execution.name) >= MAX_EXECUTION_NAME:
            described = self._orchestrator.describe(execution.arn).input or {}
            job_id = str(described.get("job", {}).get("job_id", job_id))
        return job_id, run

    def execution_arn(self, job_id: str, run: int) -> str:
        return execution_arn(self._machine, execution_name(job_id, run))

    def json(self, key: str) -> Any:
        try:
            return get_json(self._storage, self._bucket, key)
        except ObjectMissing:
            return None
