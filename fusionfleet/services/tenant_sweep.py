"""The watchdog's tenant round, after its job round: waiting jobs admitted, budgets enforced.

Every sweep (a minute on AWS, seconds locally) it
- admits each tenant's waiting jobs (fusionfleet.services.admission): the backstop behind the slicer
  and the notice follower, which admit at once;
- checks every tenant with a budget against its ledger for the month (fusionfleet.fleet.budget), and
  for a tenant over it: tells the tenant once (one notice per cap and month, naming the budget), then
  holds its running jobs (`on_budget: stop`: each execution stopped and the job queued again to resume
  as its next run, rendering only what is missing) or cancels them (`on_budget: cancel`: each ends
  CANCELLED with one notice whose reason names the budget). Workers stopped taking the tenant's
  segments the moment the budget's marker was written.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fusionfleet.adapters.notify import Notifier, subject_line
from fusionfleet.adapters.orchestrator import ExecutionMissing, Orchestrator
from fusionfleet.adapters.storage import Storage
from fusionfleet.fleet import budget
from fusionfleet.fleet.tenant_settings import TenantSettings, read_settings, tenants_with_settings
from fusionfleet.jobs.ids import TENANT_SEPARATOR
from fusionfleet.jobs.ledger import month_of
from fusionfleet.jobs.runs import parse_execution_name
from fusionfleet.jobs.waiting import WaitingRecord, enqueue, submission_order, tenants_waiting
from fusionfleet.services.admission import Admitter

logger = logging.getLogger(__name__)

BUDGET_HOLD_ERROR = "BudgetHold"  # how a held job's execution was stopped
# Cancels a running job with a reason (fusionfleet.services.operations); the message it returns.
Cancel = Callable[[str, str], str]


@dataclass(frozen=True)
class TenantRound:
    admitted: dict[str, list[str]] = field(default_factory=dict)  # tenant → jobs started
    over_budget: list[str] = field(default_factory=list)  # tenants told this round
    held: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)


class TenantSweep:
    def __init__(
        self,
        storage: Storage,
        orchestrator: Orchestrator,
        notifier: Notifier,
        work_bucket: str,
        state_machine_arn: str,
        topic_arn: str,
        admitter: Admitter,
        cancel: Cancel,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._storage = storage
        self._orchestrator = orchestrator
        self._notifier = notifier
        self._bucket = work_bucket
        self._machine = state_machine_arn
        self._topic = topic_arn
        self._admitter = admitter
        self._cancel = cancel
        self._clock = clock

    def sweep(self) -> TenantRound:
        result = TenantRound()
        for tenant in tenants_with_settings(self._storage, self._bucket):
            try:
                self._budget(read_settings(self._storage, self._bucket, tenant), result)
            except Exception:
                logger.exception("tenant round: the budget of %s could not be checked", tenant)
        for tenant in tenants_waiting(self._storage, self._bucket):
            try:
                started = [item.job_id for item in self._admitter.admit(tenant)]
            except Exception:
                logger.exception("tenant round: admitting %s's jobs failed", tenant)
                continue
            if started:
                result.admitted[tenant] = started
        return result

    def _budget(self, settings: TenantSettings, result: TenantRound) -> None:
        if settings.monthly_budget_usd is None:
            return
        now = self._clock()
        month = month_of(now)
        status = budget.check(self._storage, self._bucket, settings, month, now)
        if not status.over:
            return
        running = self._running(settings.tenant)
        # The action first, the notice once after: a round that dies between them acts again next
        # time (holding a held job, or cancelling a cancelled one, is refused and harmless).
        for execution in running:
            job_id = parse_execution_name(execution.name)[0]
            reason = budget.over_reason(settings.tenant, settings.monthly_budget_usd, status.spent_usd, month,
                                        settings.on_budget)  # fmt: skip
            try:
                if settings.on_budget == "cancel":
                    self._cancel(job_id, reason)
                    result.cancelled.append(job_id)
                else:
                    self._hold(job_id, execution.arn, reason)
                    result.held.append(job_id)
            except Exception:
                logger.exception("tenant round: %s of %s could not be held or cancelled", job_id, settings.tenant)
        if budget.claim_notice(self._storage, self._bucket, settings, month, now):
            self._notify(settings, status, month, [parse_execution_name(e.name)[0] for e in running])
            result.over_budget.append(settings.tenant)

    def _running(self, tenant: str) -> list[Any]:
        head = f"{tenant}{TENANT_SEPARATOR}"
        return [e for e in self._orchestrator.running_executions(self._machine) if e.name.startswith(head)]

    def _hold(self, job_id: str, arn: str, reason: str) -> None:
        """Queue the job to resume, then stop its execution: the job reads WAITING, never FAILED."""
        described = self._orchestrator.describe(arn)
        payload = described.input or {}
        context = payload.get("job", {})
        tenant = str(context.get("tenant") or job_id.partition(TENANT_SEPARATOR)[0])
        submitted = _epoch(str(context.get("submitted_at", ""))) or self._clock()
        now = self._clock()
        record = WaitingRecord(
            job_id=job_id, tenant=tenant, order=submission_order(submitted, submitted), submitted_at=now,
            run=int(context.get("run", 0)), execution_name=described.name, execution_input=payload,
            waiting_since=datetime.fromtimestamp(now, UTC).isoformat(), reason=f"held: {reason}", resume=True,
        )  # fmt: skip
        enqueue(self._storage, self._bucket, record)
        try:
            self._orchestrator.stop(arn, BUDGET_HOLD_ERROR, reason)
        except ExecutionMissing:
            logger.warning("tenant round: %s's execution is gone", job_id)
        logger.warning("job %s held: %s", job_id, reason)

    def _notify(self, settings: TenantSettings, status: budget.BudgetStatus, month: str, jobs: list[str]) -> None:
        cap = settings.monthly_budget_usd or 0.0
        reason = budget.over_reason(settings.tenant, cap, status.spent_usd, month, settings.on_budget)
        notice = {
            "status": "budget", "stage": "budget", "tenant": settings.tenant, "month": month,
            "budget_usd": cap, "spent_usd": round(status.spent_usd, 6), "on_budget": settings.on_budget,
            "jobs": jobs, "reason": reason,
        }  # fmt: skip
        self._notifier.publish(self._topic, subject_line(f"FusionFleet tenant {settings.tenant} budget spent"), notice)
        logger.warning("tenant %s told: %s", settings.tenant, reason)


def _epoch(text: str) -> float | None:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
