"""Per-tenant limits, so one tenant cannot fill the fleet: jobs running at once and segments in flight.

The stack's settings are every tenant's default; a tenant's own (fusionfleet.fleet.tenant_settings)
replace them. A job over the job limit waits its turn (fusionfleet.services.admission).
"""

from __future__ import annotations

from dataclasses import dataclass

from fusionfleet.errors import FusionFleetError
from fusionfleet.layout import is_tenant_name

# The `tenant` message attribute of a single-tenant (`jobs/`) notice: SNS String attributes cannot be
# empty, and no tenant is called this (tenant names start with [a-z0-9]).
NO_TENANT = "-"


def check_tenant_name(name: str) -> str:
    """`name` if it is a valid tenant name, else an error that says what one may be."""
    if is_tenant_name(name):
        return name
    raise FusionFleetError(
        f"{name!r} is not a tenant name: 1 to 32 characters of a-z, 0-9 and '-', starting with a letter or digit"
    )


def notice_tenant(tenant: str | None) -> str:
    """The value of a notice's `tenant` attribute, which subscribers filter on."""
    return tenant or NO_TENANT


@dataclass(frozen=True)
class TenantLimits:
    """0 means no limit.

    The segment budget is split evenly over the jobs a tenant may run: each of its jobs keeps at most
    `max_segments // max_running_jobs` segments in flight, so all of them together stay within
    `max_segments`, and the share is fixed per job (a duplicate event rebuilds the same execution input).
    """

    max_running_jobs: int = 0
    max_segments: int = 0

    def __post_init__(self) -> None:
        if self.max_running_jobs < 0 or self.max_segments < 0:
            raise ValueError("tenant limits cannot be negative")
        if self.max_segments and not self.max_running_jobs:
            raise ValueError(
                "a tenant segment limit needs a tenant job limit too: the segments are shared among the jobs "
                "a tenant may run at once"
            )
        if self.max_segments and self.max_segments < self.max_running_jobs:
            raise ValueError(
                f"the tenant segment limit ({self.max_segments}) is below the tenant job limit "
                f"({self.max_running_jobs}): every running job needs at least one segment in flight"
            )

    def render_concurrency(self, stack_concurrency: int) -> int:
        """Segments in flight for one job of a tenant: the stack's per-job limit, or the tenant's share."""
        if not self.max_segments:
            return stack_concurrency
        return min(stack_concurrency, self.max_segments // self.max_running_jobs)
