"""Each tenant's own settings, set by an operator (`fusionfleet tenant set T …`) and read by every party
that schedules, renders or bills the tenant's work: the slicer, the admitter (in the watchdog and the
notice follower), the workers and the API.

They live in the work bucket (`work/_tenants/<T>/settings.json`), beside the records those parties
already read, so no party needs another service. A setting left unset falls back to the stack's
(TenantMaxRunningJobs, TenantMaxSegments); a tenant without a record runs under the stack's settings
alone, with any priority and no budget.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from fusionfleet import tenant_layout
from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import FusionFleetError, ObjectMissing
from fusionfleet.fleet.tenants import TenantLimits, check_tenant_name
from fusionfleet.jobs.manifest import PRIORITIES, Priority

BudgetAction = Literal["stop", "cancel"]
BUDGET_ACTIONS: tuple[BudgetAction, ...] = get_args(BudgetAction)


class TenantSettings(BaseModel):
    # Written by the CLI of one version and read by workers of another: unknown fields are ignored.
    model_config = ConfigDict(extra="ignore", frozen=True)

    tenant: str
    max_running_jobs: int | None = Field(default=None, ge=0)  # None: the stack's; 0: no limit
    max_segments: int | None = Field(default=None, ge=0)  # None: the stack's; 0: no limit
    max_priority: Priority | None = None  # None: any
    monthly_budget_usd: float | None = Field(default=None, ge=0)  # None: no budget
    on_budget: BudgetAction = "stop"  # stop: hold the tenant's jobs; cancel: cancel the running ones
    updated_at: str = ""

    def limits(self, stack: TenantLimits) -> TenantLimits:
        """The job and segment limits this tenant runs under: its own where set, else the stack's."""
        jobs = stack.max_running_jobs if self.max_running_jobs is None else self.max_running_jobs
        segments = stack.max_segments if self.max_segments is None else self.max_segments
        try:
            return TenantLimits(max_running_jobs=jobs, max_segments=segments)
        except ValueError as error:
            raise FusionFleetError(f"tenant {self.tenant}'s limits do not fit together: {error}") from error

    def priority_problem(self, priority: Priority) -> str | None:
        """Why this tenant may not submit at `priority`, or None."""
        if self.max_priority is None:
            return None
        # PRIORITIES run from the highest: a lower index is a higher priority.
        if PRIORITIES.index(priority) >= PRIORITIES.index(self.max_priority):
            return None
        return (
            f"tenant {self.tenant} may submit at most {self.max_priority} priority (its max-priority setting); "
            f"this job asks for {priority}: submit it at {self.max_priority} or lower"
        )

    @property
    def limited(self) -> bool:
        """Whether the tenant's jobs go through admission (a job limit or a budget of its own)."""
        return bool(self.max_running_jobs) or self.monthly_budget_usd is not None


def default_settings(tenant: str) -> TenantSettings:
    return TenantSettings(tenant=tenant)


def read_settings(storage: Storage, bucket: str, tenant: str) -> TenantSettings:
    """The tenant's settings, or the defaults when it has none."""
    try:
        return TenantSettings.model_validate_json(storage.get_bytes(bucket, tenant_layout.tenant_settings_key(tenant)))
    except ObjectMissing:
        return default_settings(tenant)


def write_settings(storage: Storage, bucket: str, settings: TenantSettings, stack: TenantLimits) -> TenantSettings:
    """Store the settings (checked against the stack's defaults first); returns what was stored."""
    check_tenant_name(settings.tenant)
    settings.limits(stack)  # raises when the limits do not fit together
    stored = settings.model_copy(update={"updated_at": datetime.now(UTC).isoformat(timespec="seconds")})
    storage.put_bytes(
        bucket,
        tenant_layout.tenant_settings_key(settings.tenant),
        stored.model_dump_json(indent=2).encode(),
        "application/json",
    )
    return stored


def tenants_with_settings(storage: Storage, bucket: str) -> list[str]:
    """Every tenant that has a settings record."""
    found = []
    for key in storage.list_keys(bucket, tenant_layout.TENANT_RECORDS_PREFIX):
        tenant = tenant_layout.parse_tenant_settings_key(key)
        if tenant is not None:
            found.append(tenant)
    return sorted(found)
