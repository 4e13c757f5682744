"""What a render worker's attempts cost, whom they bill, and whether their tenant may still spend.

Each attempt record is stamped with this worker's capacity type and price when it starts and its
`alive_at` refreshed while it runs (fusionfleet.jobs.cost); when it ends, the tenant's ledger gets its
entry and the tenant's month is checked against its budget (fusionfleet.fleet.budget), creating the
month's marker when the cap is reached. Before a segment of a tenant with a budget is taken, the
marker is looked at (one HEAD): an over-budget tenant's segments are not started.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from fusionfleet.adapters.storage import Storage
from fusionfleet.fleet import budget
from fusionfleet.fleet.tenant_settings import TenantSettings, read_settings
from fusionfleet.jobs.cost import CapacityType, GpuPrices
from fusionfleet.jobs.ledger import month_of, record_spend
from fusionfleet.messages import JobContext, SegmentAttempt

logger = logging.getLogger(__name__)
SETTINGS_TTL_S = 15.0  # a tenant's new budget reaches every worker within this


class Billing:
    def __init__(
        self,
        storage: Storage,
        capacity: CapacityType,
        prices: GpuPrices,
        clock: Callable[[], float] = time.time,
        settings_ttl_s: float = SETTINGS_TTL_S,
    ) -> None:
        self._storage = storage
        self._capacity = capacity
        self._prices = prices
        self._clock = clock
        self._ttl = settings_ttl_s
        self._settings: dict[tuple[str, str], tuple[float, TenantSettings]] = {}
        self._lock = threading.Lock()

    def stamp(self, began: SegmentAttempt) -> SegmentAttempt:
        """The attempt as it starts, with what its worker costs."""
        price = self._prices.hourly(self._capacity)
        return began.model_copy(
            update={"capacity": self._capacity, "hourly_price": price, "alive_at": began.started_at}
        )

    def ended(self, bucket: str, record: SegmentAttempt) -> None:
        """The attempt's ledger entry, and its tenant's budget checked (tenant jobs only; best effort)."""
        try:
            written = record_spend(self._storage, bucket, record, self._prices, self._clock())
            if written is None:
                return
            tenant = record.job_id.partition("_")[0]
            settings = self._tenant(bucket, tenant)
            if settings.monthly_budget_usd is None:
                return
            status = budget.check(self._storage, bucket, settings, month_of(record.started_at), self._clock())
            if status.over:
                logger.warning("tenant %s is over its budget: %s", tenant, status.describe())
        except Exception:
            logger.warning("the spend of attempt %s of %s not recorded", record.attempt, record.job_id, exc_info=True)

    def held(self, job: JobContext) -> str | None:
        """Why no segment of this job may start now (its tenant's budget is spent), or None."""
        if job.tenant is None:
            return None
        settings = self._tenant(job.work_bucket, job.tenant)
        month = month_of(self._clock())
        if not budget.is_over(self._storage, job.work_bucket, settings, month):
            return None
        return f"tenant {job.tenant}'s monthly budget of ${settings.monthly_budget_usd:.4f} is spent ({month})"

    def _tenant(self, bucket: str, tenant: str) -> TenantSettings:
        now = self._clock()
        with self._lock:
            cached = self._settings.get((bucket, tenant))
            if cached is not None and now - cached[0] < self._ttl:
                return cached[1]
        settings = read_settings(self._storage, bucket, tenant)
        with self._lock:
            self._settings[(bucket, tenant)] = (now, settings)
        return settings
