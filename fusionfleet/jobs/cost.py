"""What a job really cost: every attempt of every segment, failed or not, and every backup copy, each
priced at what its worker's instance costs (On-Demand or Spot).

A worker stamps each attempt record with its capacity type and hourly price when the attempt starts
(gpu_worker), and refreshes `alive_at` while it works, so an attempt whose worker was killed still has
a duration: from its start to the last time it was seen alive. Pure functions; the merge, `status`,
the dashboards and the tenant ledger all price attempts with them, so they agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from fusionfleet.jobs.states import Recorded
from fusionfleet.messages import JobCost, SegmentAttempt

# g5.xlarge On-Demand in us-east-1 (one NVIDIA A10G), dollars per hour: the default GpuInstanceType's price.
DEFAULT_GPU_HOURLY_PRICE = 1.006
CapacityType = Literal["on-demand", "spot"]
CAPACITY_TYPES: tuple[CapacityType, ...] = get_args(CapacityType)
# Workers refresh a running attempt's `alive_at` this often; one not refreshed for STALE_AFTER_S is dead.
ALIVE_EVERY_S = 10.0
STALE_AFTER_S = 3 * ALIVE_EVERY_S


@dataclass(frozen=True)
class GpuPrices:
    """Dollars per GPU-hour by capacity type, until a price source is wired (the template's parameters)."""

    on_demand: float = DEFAULT_GPU_HOURLY_PRICE
    spot: float | None = None  # None: priced as On-Demand (never under the bill)

    def __post_init__(self) -> None:
        if self.on_demand < 0 or (self.spot is not None and self.spot < 0):
            raise ValueError(f"a GPU-hour cannot cost less than nothing: {self}")

    def hourly(self, capacity: str) -> float:
        return self.spot if capacity == "spot" and self.spot is not None else self.on_demand


def attempt_seconds(record: SegmentAttempt, now: float, stale_after_s: float = STALE_AFTER_S) -> float:
    """The worker's time on one attempt. An ended attempt: start to end. A running one: start to now
    while its worker is alive, else start to the last time it was seen alive (its worker was killed)."""
    if record.finished_at:
        return max(0.0, record.finished_at - record.started_at)
    last_seen = max(record.alive_at, record.started_at)
    alive = now - last_seen <= stale_after_s
    return max(0.0, (now if alive else last_seen) - record.started_at)


def attempt_price(record: SegmentAttempt, prices: GpuPrices) -> float:
    """The hourly price stamped by its worker, else the stack's price for its capacity type."""
    return record.hourly_price if record.hourly_price > 0 else prices.hourly(record.capacity)


def attempt_usd(record: SegmentAttempt, prices: GpuPrices, now: float, stale_after_s: float = STALE_AFTER_S) -> float:
    return attempt_seconds(record, now, stale_after_s) / 3600 * attempt_price(record, prices)


def job_cost(
    attempts: Iterable[SegmentAttempt], prices: GpuPrices, now: float, stale_after_s: float = STALE_AFTER_S
) -> JobCost:
    """Every attempt's worker time × its price, summed; engine time counts the attempts that succeeded."""
    listed = list(attempts)
    billed_s = usd = engine_s = wasted = 0.0
    by_capacity: dict[str, float] = {}
    for record in listed:
        seconds = attempt_seconds(record, now, stale_after_s)
        dollars = seconds / 3600 * attempt_price(record, prices)
        billed_s += seconds
        usd += dollars
        capacity = record.capacity or "on-demand"
        by_capacity[capacity] = by_capacity.get(capacity, 0.0) + dollars
        if record.status == Recorded.SUCCEEDED:
            engine_s += record.engine_s
        else:
            wasted += dollars
    return JobCost(
        engine_gpu_s=round(engine_s, 3),
        billed_gpu_s=round(billed_s, 3),
        gpu_hourly_price=round(usd / (billed_s / 3600), 6) if billed_s else prices.on_demand,
        estimated_usd=round(usd, 6),
        attempts=len(listed),
        wasted_usd=round(wasted, 6),
        usd_by_capacity={name: round(value, 6) for name, value in sorted(by_capacity.items())},
    )


def attempts_cost(
    stored: list[SegmentAttempt], now: float, ended: bool, prices: GpuPrices | None = None
) -> dict[str, Any] | None:
    """Every attempt so far (failed, killed, backup copies) at its worker's price, as the job views show it:
    `final` once the job ended (`ended`) and no attempt still runs. None without any attempt."""
    if not stored:
        return None
    priced = job_cost(stored, prices or GpuPrices(), now)
    running = any(not record.finished_at and now - record.alive_at <= STALE_AFTER_S for record in stored)
    return {**priced.model_dump(mode="json"), "final": ended and not running}
