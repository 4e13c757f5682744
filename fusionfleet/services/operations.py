"""Steering jobs: cancel and retry, for the CLI, the operator's dashboard and the tenant API.

Reading jobs is the read model's (`fusionfleet.jobs.reader`); these act on what the farm keeps: Step
Functions executions (one per run of a job, `fusionfleet.jobs.runs`), the cancel marker, the notice
record (`fusionfleet.jobs.final_notice`), the plans and segment records in the work bucket.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from fusionfleet import layout
from fusionfleet.adapters.notify import Notifier
from fusionfleet.adapters.orchestrator import ExecutionMissing, Orchestrator
from fusionfleet.adapters.storage import Storage, put_json
from fusionfleet.errors import ObjectMissing, OperationRefused
from fusionfleet.fleet.tenants import notice_tenant
from fusionfleet.jobs import summary
from fusionfleet.jobs.facts import JobFacts, JobRecords
from fusionfleet.jobs.final_notice import (
    CANCEL,
    NOTICE_STATES,
    STATE_MACHINE,
    FinalNotices,
    TopicChannel,
    prepared_notice,
    state_machine_claim,
    told_by_itself,
    yielded,
)
from fusionfleet.jobs.runs import RunRecord, execution_name, record_run
from fusionfleet.jobs.states import CANCEL_REASON, Action, JobState, allowed, refusal
from fusionfleet.jobs.waiting import dequeue

CANCEL_ERROR = "JobCancelled"
# A cancel that claimed the notice and died before publishing is finished by another after this.
RECLAIM_S = 120.0


class FarmResources(Protocol):
    """What operations need of a stack: the CLI's `StackResources`, or a Lambda's settings."""

    @property
    def work_bucket(self) -> str: ...
    @property
    def state_machine_arn(self) -> str: ...
    @property
    def topic_arn(self) -> str: ...


@dataclass
class Operations:
    storage: Storage
    orchestrator: Orchestrator
    notifier: Notifier
    resources: FarmResources
    clock: Callable[[], float] = field(default=time.time)

    @property
    def records(self) -> JobRecords:
        return JobRecords(self.storage, self.orchestrator, self.resources.work_bucket, self.resources.state_machine_arn)

    def cancel(self, job_id: str, reason: str = CANCEL_REASON) -> str:
        """Stop a running job; it ends CANCELLED with exactly one notice saying so (and why: `reason`)."""
        records = self.records
        facts = records.facts(job_id)
        state = facts.state
        if state is JobState.WAITING and facts.context is not None and facts.waiting is not None:
            return self._cancel_waiting(facts, reason)
        if not allowed(state, Action.CANCEL) or facts.execution is None or facts.context is None:
            raise OperationRefused(f"job {job_id} is {state}: {refusal(state, Action.CANCEL)}")
        bucket = self.resources.work_bucket
        now = datetime.fromtimestamp(self.clock(), UTC)
        notices = self._notices
        # Flagged before anything else: from here its summary sends readers to the full read.
        summary.update(self.storage, bucket, job_id, summary.cancelled)
        # The notice is claimed first, so the watchdog never notifies the stopped execution itself.
        if not notices.claim(job_id, CANCEL, now, "cancelled", CANCEL_ERROR, reason, retake_after_s=RECLAIM_S):
            raise OperationRefused(f"job {job_id} is already being cancelled or closed; its notice is on its way")
        self._stop(facts.execution.arn, reason)
        # Then the marker: workers drop the job's queued segments and stop the one they render. After
        # the stop, so each task they drop gets its heartbeat once its execution is stopping.
        put_json(
            self.storage, bucket, layout.cancel_key(job_id), {"cancelled_at": now.isoformat(), "run": facts.run.run}
        )
        after = self.orchestrator.describe(facts.execution.arn)
        if told_by_itself(after.status, after.error):
            # It ended by itself, with its own notice, before the stop: nothing was cancelled.
            self.storage.delete_prefix(bucket, layout.cancel_key(job_id))
            notices.mark_published(job_id, STATE_MACHINE, f"ended {after.status} before the cancel", now)
            raise OperationRefused(f"job {job_id} ended {after.status} before it could be cancelled; nothing changed")
        built = None
        if yielded(after.status, after.error):
            built = prepared_notice(self.orchestrator.state_output(facts.execution.arn, NOTICE_STATES))
        if built is not None:
            # It had merged (or failed) and was about to notify when the stop landed, and yielded the
            # notice to the cancel's claim: the job ended by itself, so its own notice is the one sent.
            self.storage.delete_prefix(bucket, layout.cancel_key(job_id))
            status = str(built["status"])
            notices.deliver(job_id, {**built, "notified_by": "cancel"}, CANCEL, now)
            raise OperationRefused(f"job {job_id} ended ({status}) as it was cancelled; its {status} notice was sent")
        done = len(records.segment_files(job_id).done)
        total = facts.context.segment_count
        notice = {
            "status": "cancelled",
            "stage": "cancel",
            "job_id": job_id,
            "tenant": notice_tenant(facts.context.tenant),
            "manifest": facts.context.manifest.model_dump(),
            "error": CANCEL_ERROR,
            "reason": reason,
            "segments_done": done,
            "segments_total": total,
            "cancelled_at": now.isoformat(),
        }
        notices.deliver(job_id, notice, CANCEL, now)
        return (
            f"job {job_id} cancelled: {done} of {total} segments had rendered; its queued segments will not be rendered"
        )

    def _cancel_waiting(self, facts: JobFacts, reason: str) -> str:
        """A waiting job leaves its tenant's queue, ends CANCELLED, and is told once (it never ran, or was
        held: its stopped execution stays as it was)."""
        assert facts.context is not None and facts.waiting is not None
        job_id, bucket = facts.job_id, self.resources.work_bucket
        now = datetime.fromtimestamp(self.clock(), UTC)
        notices = self._notices
        summary.update(self.storage, bucket, job_id, summary.cancelled)
        if not notices.claim(job_id, CANCEL, now, "cancelled", CANCEL_ERROR, reason, retake_after_s=RECLAIM_S):
            raise OperationRefused(f"job {job_id} is already being cancelled or closed; its notice is on its way")
        put_json(
            self.storage, bucket, layout.cancel_key(job_id), {"cancelled_at": now.isoformat(), "run": facts.run.run}
        )
        dequeue(self.storage, bucket, facts.waiting)
        notice = {
            "status": "cancelled", "stage": "cancel", "job_id": job_id, "tenant": notice_tenant(facts.context.tenant),
            "manifest": facts.context.manifest.model_dump(), "error": CANCEL_ERROR, "reason": reason,
            "segments_done": len(self.records.segment_files(job_id).done),
            "segments_total": facts.context.segment_count, "cancelled_at": now.isoformat(),
        }  # fmt: skip
        notices.deliver(job_id, notice, CANCEL, now)
        return f"job {job_id} cancelled while it waited: it leaves its tenant's queue"

    def resume(self, job_id: str) -> str:
        """Run a job held by its tenant's budget again, as a retry does (the admitter calls it, in turn)."""
        facts = self.records.facts(job_id)
        if facts.state is not JobState.WAITING or facts.waiting is None or not facts.waiting.resume:
            raise OperationRefused(f"job {job_id} is {facts.state}, not held by its tenant's budget")
        return self.retry(job_id, held=True)

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
        payload = {
            **first,
            "job": {**first["job"], "run": run},
            "plan": {"bucket": bucket, "key": layout.run_plan_key(job_id, run)},
            # A run of a job started before its input carried this gets it too.
            "final_notice": state_machine_claim(job_id),
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
    @property
    def _notices(self) -> FinalNotices:
        channel = TopicChannel(self.notifier, self.resources.topic_arn)
        return FinalNotices(self.storage, self.resources.work_bucket, (channel,))

    def _valid(self, job_id: str, index: int) -> bool:
        """A segment's output is valid when its record says succeeded and the segment object exists."""
        record = self.records.segment_record(job_id, index)
        if record is None or record.status != "succeeded":
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

    def _stop(self, arn: str, reason: str = CANCEL_REASON) -> None:
        try:
            self.orchestrator.stop(arn, CANCEL_ERROR, reason)
        except ExecutionMissing as error:
            raise OperationRefused(f"the execution {arn} no longer exists") from error
