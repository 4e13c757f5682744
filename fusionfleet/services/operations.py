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
from typing import Protocol

from fusionfleet import layout
from fusionfleet.adapters.notify import Notifier
from fusionfleet.adapters.orchestrator import ExecutionMissing, Orchestrator
from fusionfleet.adapters.storage import Storage, put_json
from fusionfleet.errors import OperationRefused
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
    told_by_itself,
    yielded,
)
from fusionfleet.jobs.states import CANCEL_REASON, Action, JobState, NoticeStatus, allowed, refusal
from fusionfleet.jobs.waiting import dequeue
from fusionfleet.services.admission import AdmissionConfig, Admitter
from fusionfleet.services.job_retry import Admit, JobRetry, Machine
from fusionfleet.webhooks.outbox import WebhookOutbox

CANCEL_ERROR = "JobCancelled"
# A cancel that claimed the notice and died before publishing is finished by another after this.
RECLAIM_S = 120.0


class FarmResources(Machine, Protocol):
    """What operations need of a stack: the CLI's `StackResources`, or a Lambda's settings."""

    @property
    def topic_arn(self) -> str: ...


@dataclass
class Operations:
    storage: Storage
    orchestrator: Orchestrator
    notifier: Notifier
    resources: FarmResources
    clock: Callable[[], float] = field(default=time.time)
    # The stack's admission limits: a tenant's retried job is admitted at once with them (None: it waits
    # for the next admission); `outbox` takes the `started` event of a job admitted so.
    admission: AdmissionConfig | None = None
    outbox: WebhookOutbox | None = None

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
        notices = self._notices(quiet=facts.context.batch is not None and facts.context.batch.quiet)
        # Flagged before anything else: from here its summary sends readers to the full read.
        summary.update(self.storage, bucket, job_id, summary.cancelled)
        # The notice is claimed first, so the watchdog never notifies the stopped execution itself.
        if not notices.claim(
            job_id, CANCEL, now, NoticeStatus.CANCELLED, CANCEL_ERROR, reason, retake_after_s=RECLAIM_S
        ):
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
            "status": NoticeStatus.CANCELLED,
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
        notices = self._notices()
        summary.update(self.storage, bucket, job_id, summary.cancelled)
        if not notices.claim(
            job_id, CANCEL, now, NoticeStatus.CANCELLED, CANCEL_ERROR, reason, retake_after_s=RECLAIM_S
        ):
            raise OperationRefused(f"job {job_id} is already being cancelled or closed; its notice is on its way")
        put_json(
            self.storage, bucket, layout.cancel_key(job_id), {"cancelled_at": now.isoformat(), "run": facts.run.run}
        )
        dequeue(self.storage, bucket, facts.waiting)
        notice = {
            "status": NoticeStatus.CANCELLED, "stage": "cancel", "job_id": job_id,
            "tenant": notice_tenant(facts.context.tenant),
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
        return JobRetry(self.storage, self.orchestrator, self.resources, self.clock, self._admit()).retry(job_id, held)

    def _admit(self) -> Admit | None:
        """Admits a tenant's waiting jobs as the watchdog does (the same lease, slots and budget hold; a held
        job ahead in line resumes through `resume`), or None where the stack's limits are not known."""
        if self.admission is None:
            return None
        admitter = Admitter(self.storage, self.orchestrator, self.admission, self.outbox, self.resume, self.clock)
        return lambda tenant: [admitted.job_id for admitted in admitter.admit(tenant)]

    # ------------------------------------------------------------------ internals
    def _notices(self, quiet: bool = False) -> FinalNotices:
        """The notice protocol with the topic, or with no channel for a batch's quiet item (its batch tells)."""
        channels = () if quiet else (TopicChannel(self.notifier, self.resources.topic_arn),)
        return FinalNotices(self.storage, self.resources.work_bucket, channels)

    def _stop(self, arn: str, reason: str = CANCEL_REASON) -> None:
        try:
            self.orchestrator.stop(arn, CANCEL_ERROR, reason)
        except ExecutionMissing as error:
            raise OperationRefused(f"the execution {arn} no longer exists") from error
