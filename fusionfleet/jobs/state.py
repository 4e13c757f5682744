"""The job-state read model: what state a job is in, read from what the farm already keeps.

The one place that derives a job's state. The CLI's `status`, `Operations` (and through it the
dashboard and the tenant API) and the watchdog read jobs through it, so they cannot disagree:

- a job's facts: its job record or rejection record, its current run (`fusionfleet.jobs.runs`), the
  execution of that run, the operator's cancel marker;
- its state (one of `JOB_STATES`) and the reason that goes with it, from those facts (pure);
- its Map Run progress, counted over the whole job (a retry's Map Run covers only its segments);
- its files under `segments/`, sorted into outputs, records and attempt records;
- which job an execution belongs to (a retry of a long job id is named with the id cut short).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fusionfleet import layout
from fusionfleet.adapters.orchestrator import (
    TERMINAL,
    Execution,
    ExecutionMissing,
    Orchestrator,
    Progress,
    execution_arn,
)
from fusionfleet.adapters.storage import Storage, get_json
from fusionfleet.errors import JobNotFound, ObjectMissing
from fusionfleet.jobs.runs import (
    MAX_EXECUTION_NAME,
    RunRecord,
    current_run,
    execution_name,
    is_cancelled,
    parse_execution_name,
)
from fusionfleet.jobs.waiting import WaitingRecord, read_waiting
from fusionfleet.messages import JobContext

__all__ = [
    "CANCEL_REASON",
    "JOB_STATES",
    "JobFacts",
    "JobStates",
    "SegmentFiles",
    "job_state",
    "whole_job",
]

# WAITING: accepted and planned, waiting for its tenant's turn or budget (fusionfleet.jobs.waiting).
JOB_STATES = (
    "PENDING", "WAITING", "RUNNING", "SUCCEEDED", "FAILED", "REJECTED", "CANCELLED", "TIMED_OUT", "ABORTED",
)  # fmt: skip
CANCEL_REASON = "cancelled by an operator"


def job_state(execution_status: str | None, rejected: bool, cancelled: bool, waiting: bool = False) -> str:
    """A job's state from its current run's execution, its rejection record, its cancel marker and its
    waiting record (queued for its tenant's turn, or held by its tenant's budget: stopped, to resume). Pure."""
    if waiting and not cancelled and execution_status in (None, "ABORTED", "RUNNING"):
        return "WAITING"
    if execution_status is None:
        return "CANCELLED" if cancelled else "REJECTED" if rejected else "PENDING"
    # The marker is written once the execution was told to stop; some engines (LocalStack) report
    # it RUNNING until its waiting tasks have noticed.
    if execution_status in ("ABORTED", "RUNNING") and cancelled:
        return "CANCELLED"
    # Anything not ended (RUNNING, or a redriven execution's PENDING_REDRIVE) is still running.
    return execution_status if execution_status in TERMINAL else "RUNNING"


def whole_job(progress: Progress | None, execution: Execution) -> Progress | None:
    """A retry's Map Run covers only the segments it renders: the others were done before it. Pure."""
    total = int((execution.input or {}).get("job", {}).get("segment_count", 0))
    if progress is None or total <= progress.total:
        return progress
    before = total - progress.total
    return Progress(
        total=total,
        succeeded=progress.succeeded + before,
        failed=progress.failed,
        running=progress.running,
        pending=progress.pending,
    )


@dataclass(frozen=True)
class JobFacts:
    """What the farm knows about one job, gathered once per read."""

    job_id: str
    context: JobContext | None  # the job record; None before the slicer wrote it, or when rejected
    rejection: dict[str, Any] | None
    run: RunRecord
    execution: Execution | None  # the current run's execution; None before it started
    cancelled: bool
    waiting: WaitingRecord | None = None  # queued for its tenant's turn or budget
    cancel_reason: str = ""  # why it was cancelled, as its cancel marker says (its tenant's budget, or "")

    @property
    def state(self) -> str:
        status = self.execution.status if self.execution else None
        return job_state(status, self.rejection is not None, self.cancelled, self.waiting is not None)

    @property
    def reason(self) -> str:
        """Why the job is where it is: the rejection's reason, the cancel, or the execution's error."""
        state = self.state
        if state == "REJECTED":
            return str((self.rejection or {}).get("reason", ""))
        if state == "WAITING":
            return self.waiting.reason if self.waiting is not None else ""
        if state == "CANCELLED":
            return self.cancel_reason or CANCEL_REASON
        execution = self.execution
        if execution is None or state in ("RUNNING", "SUCCEEDED"):
            return ""
        return execution.cause or execution.error or ""

    @property
    def first_input(self) -> dict[str, Any] | None:
        """The first run's execution input, when the current run is the first (a retry copies it)."""
        return self.execution.input if self.execution is not None and self.run.run == 0 else None


@dataclass(frozen=True)
class SegmentFiles:
    """The job's files under segments/: segment outputs, their records, the attempt records."""

    outputs: frozenset[int] = frozenset()
    records: frozenset[int] = frozenset()
    attempts: tuple[tuple[int, int, int, str], ...] = ()  # (segment, run, attempt, key)

    @classmethod
    def of(cls, keys: list[str]) -> SegmentFiles:
        outputs: set[int] = set()
        records: set[int] = set()
        attempts: list[tuple[int, int, int, str]] = []
        for key in keys:
            if (segment := layout.parse_segment_file(key)) is not None:
                (outputs if segment.kind == "mp4" else records).add(segment.index)
            elif (attempt := layout.parse_attempt_record_key(key)) is not None:
                attempts.append((attempt.index, attempt.run, attempt.attempt, key))
        return cls(frozenset(outputs), frozenset(records), tuple(sorted(attempts)))

    @property
    def done(self) -> frozenset[int]:
        return self.outputs & self.records

    @property
    def failed(self) -> frozenset[int]:
        return self.records - self.outputs


class JobStates:
    """Reads jobs' facts, progress and files from the work bucket and Step Functions."""

    def __init__(self, storage: Storage, orchestrator: Orchestrator, work_bucket: str, state_machine_arn: str) -> None:
        self._storage = storage
        self._orchestrator = orchestrator
        self._bucket = work_bucket
        self._machine = state_machine_arn

    def facts(self, job_id: str, known: bool = True) -> JobFacts:
        """The job's facts. `known`: a job with neither a job record nor a rejection is `JobNotFound`;
        without it, such a job is read from its execution alone (PENDING until it has one)."""
        raw = self._json(layout.job_key(job_id))
        rejection = None if raw is not None else self._json(layout.rejection_key(job_id))
        if raw is None and rejection is None and known:
            raise JobNotFound(f"no job {job_id!r} (no job record and no rejection in the work bucket)")
        context = JobContext.model_validate(raw) if raw is not None else None
        run = current_run(self._storage, self._bucket, job_id)
        execution = None
        if rejection is None:
            try:
                execution = self._orchestrator.describe(self.execution_arn(job_id, run.run))
            except ExecutionMissing:
                execution = None
        waiting = read_waiting(self._storage, self._bucket, job_id) if raw is not None else None
        cancelled = (execution is None or execution.status in ("ABORTED", "RUNNING")) and is_cancelled(
            self._storage, self._bucket, job_id
        )
        reason = ""
        if cancelled:
            marker = self._json(layout.cancel_key(job_id))
            reason = str(marker.get("reason", "")) if isinstance(marker, dict) else ""
        return JobFacts(job_id, context, rejection, run, execution, cancelled, waiting, reason)

    def progress(self, facts: JobFacts) -> Progress | None:
        """The current run's Map Run item counts, over the whole job."""
        if facts.execution is None:
            return None
        progress = self._orchestrator.progress(facts.execution.arn)
        return whole_job(progress, facts.execution) if facts.run.run else progress

    def run_progress(self, arn: str) -> Progress | None:
        """One execution's own Map Run item counts (a retry's: only the segments it renders)."""
        return self._orchestrator.progress(arn)

    def segment_files(self, job_id: str) -> SegmentFiles:
        return SegmentFiles.of(self._storage.list_keys(self._bucket, layout.segments_prefix(job_id)))

    def context(self, job_id: str) -> JobContext | None:
        """The job record, or None when the slicer has not written one (or the execution is not a job's)."""
        raw = self._json(layout.job_key(job_id))
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

    def _json(self, key: str) -> Any:
        try:
            return get_json(self._storage, self._bucket, key)
        except ObjectMissing:
            return None
