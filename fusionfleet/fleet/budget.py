"""A tenant's monthly budget: when its spend reaches the cap, its work stops being scheduled.

The spend is the tenant's ledger for the month (fusionfleet.jobs.ledger). Whoever first sees it at or
over the cap (a worker after an attempt, or the watchdog's sweep) creates the month's marker for that
cap with a conditional write; from then on workers take none of the tenant's segments, the admitter
starts none of its jobs, and the watchdog tells the tenant once (the marker's notice claim) and holds
or cancels its running jobs (its `on_budget`). A raised cap has no marker, so the tenant runs again;
so does a new month.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from fusionfleet import tenant_layout
from fusionfleet.adapters.storage import Storage, get_json
from fusionfleet.errors import ObjectMissing
from fusionfleet.fleet.tenant_settings import TenantSettings
from fusionfleet.jobs.ledger import micro_usd, spent_micro_usd

NOTICE_SUFFIX = ".notice"


@dataclass(frozen=True)
class BudgetStatus:
    tenant: str
    month: str
    cap_usd: float | None  # None: no budget
    spent_usd: float
    over: bool

    def describe(self) -> str:
        if self.cap_usd is None:
            return f"no budget; ${self.spent_usd:.4f} spent in {self.month}"
        return f"${self.spent_usd:.4f} of ${self.cap_usd:.4f} spent in {self.month}" + (" (over)" if self.over else "")


def over_reason(tenant: str, cap_usd: float, spent_usd: float, month: str, action: str) -> str:
    """What a tenant, its jobs and its operators are told: the budget named, what happens now."""
    then = "its running jobs are cancelled" if action == "cancel" else "its jobs are held"
    return (
        f"tenant {tenant} has spent ${spent_usd:.4f} of its monthly budget of ${cap_usd:.4f} ({month}): "
        f"no more of its work is scheduled and {then} until the budget is raised or the month ends"
    )


def marker_key(settings: TenantSettings, month: str) -> str | None:
    if settings.monthly_budget_usd is None:
        return None
    return tenant_layout.budget_marker_key(settings.tenant, month, micro_usd(settings.monthly_budget_usd))


def is_over(storage: Storage, bucket: str, settings: TenantSettings, month: str) -> bool:
    """A HEAD of the month's marker for the current cap: what a worker asks before taking a segment."""
    key = marker_key(settings, month)
    if key is None:
        return False
    try:
        storage.head(bucket, key)
    except ObjectMissing:
        return False
    return True


def spend(storage: Storage, bucket: str, settings: TenantSettings, month: str) -> BudgetStatus:
    """The tenant's spend against its cap, read only (what people are shown)."""
    spent = spent_micro_usd(storage, bucket, settings.tenant, month) / 1_000_000
    cap = settings.monthly_budget_usd
    return BudgetStatus(settings.tenant, month, cap, spent, cap is not None and spent >= cap)


def check(storage: Storage, bucket: str, settings: TenantSettings, month: str, now: float) -> BudgetStatus:
    """The tenant's spend against its cap; creates the month's marker when the cap is reached (what the
    workers, the watchdog and the notice follower do: the marker is what stops the tenant's work)."""
    status = spend(storage, bucket, settings, month)
    cap, spent, over = status.cap_usd, status.spent_usd, status.over
    key = marker_key(settings, month)
    if over and key is not None:
        storage.create(
            bucket, key,
            json.dumps({"tenant": settings.tenant, "month": month, "cap_usd": cap, "spent_usd": spent, "at": now,
                        "on_budget": settings.on_budget}).encode(),
        )  # fmt: skip
    return status


def marker(storage: Storage, bucket: str, settings: TenantSettings, month: str) -> dict[str, object] | None:
    key = marker_key(settings, month)
    if key is None:
        return None
    try:
        found = get_json(storage, bucket, key)
    except ObjectMissing:
        return None
    return found if isinstance(found, dict) else None


def claim_notice(storage: Storage, bucket: str, settings: TenantSettings, month: str, now: float) -> bool:
    """The one budget notice of this cap and month: True for whoever creates its claim."""
    key = marker_key(settings, month)
    if key is None:
        return False
    claim = key.removesuffix(".json") + NOTICE_SUFFIX + ".json"
    return storage.create(bucket, claim, json.dumps({"claimed_at": now}).encode())
