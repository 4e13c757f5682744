"""A job's next run: what `fusionfleet retry`, the dashboards and the tenant API do, and what a batch's
retry does to each of its items that did not succeed (the slicer runs it, a window at a time).

Run N renders only the segments without valid output (their record says succeeded and the segment
object exists), listed in `work/<job>/plans/rNNN.json`; the markers and the notice record of the run
before are cleared first, so the run ends with exactly one notice of its own. A batch's item that runs
again reopens its batch, which then sends a summary of its own when it ends too.

A tenant's job takes its turn like a new one: its next run is queued (`fusionfleet.jobs.waiting`, the
exact StartExecution, last in its tenant's line) and started by the admitter, which claims one of the
tenant's slots with a conditional write first (`fusionfleet.services.admission`). Every caller runs an
admitter with the stack's limits right after queueing (`admit`), so a tenant below its limit runs its job
at once: the slicer (a batch's retry) and `Operations` given the stack's `AdmissionConfig` (the tenant API
from its environment, the CLI and the dashboards from the stack's parameters, or the local stack's state:
`fleetctl.admission`). Only a caller that cannot learn the limits (`admit` None: a stack deployed without
the `TenantMaxRunningJobs` parameter, a local stack started before its state recorded them) leaves the job
WAITING for the next admission: the watchdog's sweep (every minute), a job of the tenant ending, or a
slicer of the tenant's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from fusionfleet import batch_layout, layout
from fusionfleet.adapters.orchestrator import ExecutionMissing, Orchestrator
from fusionfleet.adapters.storage import Storage, put_json
from fusionfleet.errors import ObjectMissing, OperationRefused
from fusionfleet.jobs import summary
from fusionfleet.jobs.facts import JobRecords
from fusionfleet.jobs.final_notice import state_machine_claim
from fusionfleet.jobs.runs import RunRecord, execution_name, record_run
from fusionfleet.jobs.states import Action, JobState, Recorded, allowed, refusal
from fusionfleet.jobs.waiting import WaitingRecord, enqueue, submission_order

# Admits a tenant's waiting jobs (fusionfleet.services.admission.Admitter.admit); the job ids it started.
Admit = Callable[[str], list[str]]
# The reason a retried job waits when its caller could not admit it (admit None).
NEXT_ADMISSION = "waiting: it starts at its tenant's next admission (the watchdog's sweep, within a minute)"


class Machine(Protocol):
    """Where a job's runs live: its work bucket and state machine."""

    @property
    def work_bucket(self) -> str: ...
    @property
    def state_machine_arn(self) -> str: ...


@dataclass
class JobRetry:
    storage: Storage
    orchestrator: Orchestrator
    resources: Machine
    clock: Callable[[], float] = field(default=time.time)
    # Admits the tenant's waiting jobs with the stack's limits; None: the caller does not know them.
    admit: Admit | None = None

    @property
    def records(self) -> JobRecords:
        return JobRecords(self.storage, self.orchestrator, self.resources.work_bucket, self.resources.state_machine_arn)

    def retry(self, job_id: str, held: bool = False) -> str:
        """Run an ended, unsuccessful job again, rendering only the segments that have no valid output
        (`held`: a job its tenant's budget held, resumed by the admitter)."""
        records = self.records
        facts = records.facts(job_id)
        state = facts.state
        if (not allowed(state, Action.RETRY) and not held) or facts.context is None:
            raise OperationRefused(f"job {job_id} is {state}: {refusal(state, Action.RETRY)}")
        if facts.execution is not None and facts.execution.status == JobState.RUNNING:
            raise OperationRefused(
                f"job {job_id} is cancelled but its execution is still stopping; retry it in a moment"
            )
        waiting = facts.waiting
        if not held and waiting is not None and not waiting.resume and facts.execution is not None:
            # The run its admitter started is still in its tenant's line: that admitter has yet to dequeue it
            # (or died first; the next admission does it), and its delete of the record would take this
            # run's, which has the same key, leaving the job PENDING for ever.
            raise OperationRefused(
                f"job {job_id}'s last run is still leaving its tenant's line (its admitter is finishing); "
                "retry it in a moment"
            )
        # The current run's input: a job uploaded again after its record expired started over as a
        # later run, and its first execution's input is the earlier job's.
        first = (facts.execution.input if facts.execution is not None else None) or self._first_input(job_id)
        if not first or "job" not in first:
            raise OperationRefused(f"job {job_id}: its first run's input is not available, so it cannot be retried")
        bucket = self.resources.work_bucket
        plan = records.plan(job_id)
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
        # Before the start: the summary's view of the last run's end no longer holds.
        summary.update(self.storage, bucket, job_id, summary.retried(run))
        payload: dict[str, Any] = {
            **first,
            "job": {**first["job"], "run": run},
            "plan": {"bucket": bucket, "key": layout.run_plan_key(job_id, run)},
            # A run of a job started before its input carried this gets it too; a batch's quiet item stays quiet.
            "final_notice": state_machine_claim(job_id, quiet=bool((first.get("final_notice") or {}).get("quiet"))),
        }
        # A tenant's run is not started here: it takes a slot as a new job does, queued then admitted
        # (`held`: the admitter resuming it has claimed its slot already).
        queued = facts.context.tenant if not held else None
        try:
            if queued is not None:
                self._queue(job_id, queued, run, name, payload)
            else:
                self.orchestrator.start(self.resources.state_machine_arn, name, payload)
        except Exception:
            self.storage.delete_prefix(bucket, layout.waiting_key(job_id))
            self._restore_run(job_id, facts.run)
            raise
        if facts.context.batch is not None:
            # Its batch ended (or will end) without it: it sends a new summary once this run ends too.
            reopen_batch(self.storage, bucket, facts.context.batch.batch_id)
        started = queued is None or (self.admit is not None and job_id in self.admit(queued))
        shown = ", ".join(str(segment.index) for segment in missing[:20]) + ("…" if len(missing) > 20 else "")
        what = (
            f"rendering {len(missing)} of {len(plan)} segments ({shown})"
            if missing
            else "all segments are valid; merging again"
        )
        if not started:
            return f"job {job_id} retried as run {run}, {what}; it waits for its tenant {queued}'s turn"
        return f"job {job_id} retried as run {run} (execution {name}): {what}"

    def _queue(self, job_id: str, tenant: str, run: int, name: str, payload: dict[str, Any]) -> None:
        """The run's exact StartExecution, queued for its tenant's turn, last in line (a retry is a new submission)."""
        now = self.clock()
        record = WaitingRecord(
            job_id=job_id, tenant=tenant, order=submission_order(now, now), submitted_at=now, run=run,
            execution_name=name, execution_input=payload, waiting_since=datetime.fromtimestamp(now, UTC).isoformat(),
            reason="" if self.admit is not None else NEXT_ADMISSION,
        )  # fmt: skip
        enqueue(self.storage, self.resources.work_bucket, record)

    def _valid(self, job_id: str, index: int) -> bool:
        """A segment's output is valid when its record says succeeded and the segment object exists."""
        record = self.records.segment_record(job_id, index)
        if record is None or record.status != Recorded.SUCCEEDED:
            return False
        try:
            # The record names the copy that won (a straggler's backup writes beside the segment's key).
            self.storage.head(self.resources.work_bucket, record.key or layout.segment_key(job_id, index))
        except ObjectMissing:
            return False
        return True

    def _first_input(self, job_id: str) -> dict[str, Any] | None:
        try:
            return self.orchestrator.describe(self.records.execution_arn(job_id, 0)).input
        except ExecutionMissing:
            return None

    def _restore_run(self, job_id: str, previous: RunRecord) -> None:
        bucket = self.resources.work_bucket
        if previous.run == 0:
            self.storage.delete_prefix(bucket, layout.run_key(job_id))
            return
        record_run(self.storage, bucket, job_id, previous)


def reopen_batch(storage: Storage, bucket: str, batch_id: str) -> None:
    """A batch that runs again (an item retried, the batch retried) sends a summary of its own when it ends:
    its old notice record goes, and the watchdog ticks it again until then."""
    storage.delete_prefix(bucket, layout.notice_key(batch_id))
    put_json(storage, bucket, batch_layout.open_batch_key(batch_id), {"batch_id": batch_id})
