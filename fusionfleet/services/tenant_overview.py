"""One tenant at a glance, for `fusionfleet tenant show`, the dashboards and the tenant API: its settings,
its running and waiting jobs, and what it has spent this month against its budget."""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet import tenant_layout
from fusionfleet.adapters.orchestrator import Orchestrator
from fusionfleet.adapters.storage import Storage
from fusionfleet.fleet import budget
from fusionfleet.fleet.tenant_settings import TenantSettings, read_settings, tenants_with_settings
from fusionfleet.jobs.ids import TENANT_SEPARATOR
from fusionfleet.jobs.ledger import month_of
from fusionfleet.jobs.runs import parse_execution_name
from fusionfleet.jobs.waiting import read_waiting, tenants_waiting, waiting_in_order


@dataclass(frozen=True)
class WaitingJob:
    job_id: str
    position: int  # 1: the next to start
    reason: str
    held: bool  # stopped by its tenant's budget, to resume


@dataclass(frozen=True)
class TenantOverview:
    tenant: str
    settings: TenantSettings
    running: tuple[str, ...]
    waiting: tuple[WaitingJob, ...]
    spend: budget.BudgetStatus

    def as_dict(self) -> dict[str, object]:
        return {
            "tenant": self.tenant,
            "settings": self.settings.model_dump(mode="json"),
            "running": list(self.running),
            "waiting": [
                {"job_id": job.job_id, "position": job.position, "reason": job.reason, "held": job.held}
                for job in self.waiting
            ],
            "month": self.spend.month,
            "spent_usd": round(self.spend.spent_usd, 6),
            "budget_usd": self.spend.cap_usd,
            "over_budget": self.spend.over,
        }


def tenant_overview(
    storage: Storage, orchestrator: Orchestrator, work_bucket: str, state_machine_arn: str, tenant: str, now: float
) -> TenantOverview:
    settings = read_settings(storage, work_bucket, tenant)
    head = f"{tenant}{TENANT_SEPARATOR}"
    running = tuple(
        sorted(
            parse_execution_name(execution.name)[0]
            for execution in orchestrator.running_executions(state_machine_arn)
            if execution.name.startswith(head)
        )
    )
    waiting = []
    for position, (_order, job_id, _key) in enumerate(waiting_in_order(storage, work_bucket, tenant), start=1):
        record = read_waiting(storage, work_bucket, job_id)
        if record is not None:
            waiting.append(WaitingJob(job_id, position, record.reason, record.resume))
    month = month_of(now)
    status = budget.spend(storage, work_bucket, settings, month)  # read only: the workers mark the cap
    return TenantOverview(tenant, settings, running, tuple(waiting), status)


def tenant_overviews(
    storage: Storage, orchestrator: Orchestrator, work_bucket: str, state_machine_arn: str, now: float
) -> list[TenantOverview]:
    """Every tenant with settings, a waiting job or spend this month."""
    month = month_of(now)
    names = set(tenants_with_settings(storage, work_bucket)) | set(tenants_waiting(storage, work_bucket))
    for key in storage.list_keys(work_bucket, tenant_layout.SPEND_PREFIX):
        entry = tenant_layout.parse_spend_entry_key(key)
        if entry is not None and entry.month == month:
            names.add(entry.tenant)
    return [tenant_overview(storage, orchestrator, work_bucket, state_machine_arn, name, now) for name in sorted(names)]
