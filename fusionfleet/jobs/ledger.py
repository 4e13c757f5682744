"""Each tenant's spend, month by month: one ledger entry per attempt of its jobs, its amount in the key.

The worker that made an attempt writes its entry when the attempt ends (whatever the outcome: failed
attempts and backup copies cost the same GPU time); an attempt whose worker was killed never ends,
so when its job's notice goes out the follower (fusionfleet.services.job_end) writes the entries its
attempts lack, priced to when each was last seen alive. A month's spend is then one LIST of
`work/_spend/<T>/<YYYY-MM>/`, summing the amounts in the keys: what budgets are checked against.
An attempt is billed in the month it started.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from fusionfleet import tenant_layout
from fusionfleet.adapters.storage import Storage
from fusionfleet.jobs.cost import ALIVE_EVERY_S, STALE_AFTER_S, GpuPrices, attempt_price, attempt_seconds
from fusionfleet.jobs.ids import tenant_of_job
from fusionfleet.messages import SegmentAttempt

logger = logging.getLogger(__name__)


def month_of(epoch_s: float) -> str:
    """`YYYY-MM` (UTC) of a moment. Pure."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m")


def micro_usd(dollars: float) -> int:
    return round(dollars * 1_000_000)


def _prefix(tenant: str, record: SegmentAttempt) -> str:
    return tenant_layout.spend_entry_prefix(
        tenant, month_of(record.started_at), record.job_id, record.index, record.run, record.attempt,
        record.copy_number,
    )  # fmt: skip


def record_spend(
    storage: Storage,
    bucket: str,
    record: SegmentAttempt,
    prices: GpuPrices,
    now: float,
    replace: bool = True,
    stale_after_s: float = STALE_AFTER_S,
) -> int | None:
    """Write the attempt's ledger entry (tenant jobs only); the micro-dollars written, or None.

    `replace`: the attempt's own worker, at its end, replaces an entry written for it before (by the
    follower, which took it for dead); the follower (`replace=False`) never overwrites one.
    """
    tenant = tenant_of_job(record.job_id)
    if tenant is None:
        return None
    seconds = attempt_seconds(record, now, stale_after_s)
    price = attempt_price(record, prices)
    amount = micro_usd(seconds / 3600 * price)
    prefix = _prefix(tenant, record)
    existing = storage.list_keys(bucket, prefix)
    if existing and not replace:
        return None
    key = tenant_layout.spend_entry_key(
        tenant, month_of(record.started_at), record.job_id, record.index, record.run, record.attempt,
        record.copy_number, amount,
    )  # fmt: skip
    body = {"status": record.status, "worker": record.worker, "seconds": round(seconds, 3), "hourly_price": price,
            "capacity": record.capacity or "on-demand", "written_at": now}  # fmt: skip
    storage.put_bytes(bucket, key, json.dumps(body).encode(), "application/json")
    for old in existing:
        if old != key:
            storage.delete_prefix(bucket, old)
    return amount


def spent_micro_usd(storage: Storage, bucket: str, tenant: str, month: str) -> int:
    """The tenant's spend in `month`, in micro-dollars: one LIST."""
    total = 0
    for key in storage.list_keys(bucket, tenant_layout.spend_prefix(tenant, month)):
        entry = tenant_layout.parse_spend_entry_key(key)
        if entry is not None:
            total += entry.micro_usd
    return total


@dataclass(frozen=True)
class Settled:
    written: int  # entries written for attempts whose worker died
    alive: int  # attempts still working (a losing copy stopping): they write their own entries


def settle_job(
    storage: Storage, bucket: str, attempts: Iterable[SegmentAttempt], prices: GpuPrices, now: float
) -> Settled:
    """Write the entries an ended job's attempts lack: those whose worker died.

    The job has ended, so an unfinished attempt that missed two of its worker's signs of life is dead."""
    written = alive = 0
    for record in attempts:
        if not record.finished_at and now - max(record.alive_at, record.started_at) <= 2 * ALIVE_EVERY_S:
            alive += 1
            continue
        if record_spend(storage, bucket, record, prices, now, replace=False, stale_after_s=2 * ALIVE_EVERY_S):
            written += 1
    return Settled(written, alive)
