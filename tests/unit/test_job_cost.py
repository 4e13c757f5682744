"""The true cost of a job: every attempt (failed, killed, backup copies) at its instance's price; a
tenant's monthly ledger and its budget marker."""

from __future__ import annotations

import pytest

from fusionfleet import tenant_layout
from fusionfleet.fleet import budget
from fusionfleet.fleet.tenant_settings import TenantSettings
from fusionfleet.jobs.cost import STALE_AFTER_S, GpuPrices, attempt_seconds, job_cost
from fusionfleet.jobs.ledger import month_of, record_spend, settle_job, spent_micro_usd
from fusionfleet.messages import SegmentAttempt
from tests.support.fakes import EPOCH, FakeStorage

JOB = "acme_clip-0123456789abcdef"
WORK = "work"
NOW = EPOCH + 1000


def attempt(index: int, number: int, status: str, start: float, end: float = 0.0, **fields: object) -> SegmentAttempt:
    return SegmentAttempt.model_validate(
        {"job_id": JOB, "index": index, "attempt": number, "status": status, "started_at": EPOCH + start,
         "finished_at": EPOCH + end if end else 0.0, **fields}
    )  # fmt: skip


def test_every_attempt_counts_at_its_own_price_killed_and_backup_copies_included() -> None:
    prices = GpuPrices(on_demand=3.6, spot=1.2)
    records = [
        # segment 0: a Spot attempt killed 40 s in (last seen alive at 40 s), then an On-Demand one that succeeded
        attempt(0, 1, "running", 0, capacity="spot", hourly_price=1.2, alive_at=EPOCH + 40),
        attempt(0, 2, "succeeded", 100, 130, capacity="on-demand", hourly_price=3.6, engine_s=25.0),
        # segment 1: a straggler that lost to its backup copy
        attempt(1, 1, "superseded", 0, 90, capacity="on-demand", hourly_price=3.6),
        attempt(1, 1, "succeeded", 50, 70, capacity="spot", hourly_price=1.2, copy_number=1, engine_s=15.0),
        # segment 2: a failed attempt before workers stamped prices: the stack's Spot price
        attempt(2, 1, "failed", 0, 10, capacity="spot"),
    ]
    cost = job_cost(records, prices, NOW)
    seconds = [40, 30, 90, 20, 10]
    usd = [40 * 1.2, 30 * 3.6, 90 * 3.6, 20 * 1.2, 10 * 1.2]
    assert cost.billed_gpu_s == sum(seconds)
    assert cost.estimated_usd == pytest.approx(sum(usd) / 3600, abs=1e-6)
    assert cost.engine_gpu_s == 40.0  # only what the winning attempts' engines did
    assert cost.wasted_usd == pytest.approx((usd[0] + usd[2] + usd[4]) / 3600, abs=1e-6)
    assert cost.usd_by_capacity == pytest.approx(
        {"on-demand": (usd[1] + usd[2]) / 3600, "spot": (usd[0] + usd[3] + usd[4]) / 3600}, abs=1e-6
    )
    assert cost.attempts == 5


def test_a_running_attempt_counts_to_now_while_its_worker_is_alive_and_to_its_last_sign_of_life_after() -> None:
    record = attempt(0, 1, "running", 0, alive_at=EPOCH + 100)
    assert attempt_seconds(record, EPOCH + 110) == 110  # seen 10 s ago: alive
    assert attempt_seconds(record, EPOCH + 100 + STALE_AFTER_S + 1) == 100  # gone quiet: killed at 100 s
    # The merge's notice counts it to its last sign of life at once (its worker may have died a second ago)
    assert attempt_seconds(record, EPOCH + 110, stale_after_s=0.0) == 100


def test_prices_cannot_be_negative_and_spot_falls_back_to_on_demand() -> None:
    with pytest.raises(ValueError):
        GpuPrices(on_demand=-1)
    assert GpuPrices(on_demand=2.0).hourly("spot") == 2.0
    assert GpuPrices(on_demand=2.0, spot=0.5).hourly("spot") == 0.5


def test_the_ledger_sums_a_tenants_month_from_its_keys_and_an_attempts_own_end_replaces_a_guess() -> None:
    storage, prices = FakeStorage(), GpuPrices(on_demand=3.6)
    month = month_of(EPOCH)
    # a killed attempt settled when its job ended (10 s alive), then its worker turns out to end it at 20 s
    killed = attempt(0, 1, "running", 0, alive_at=EPOCH + 10, hourly_price=3.6)
    assert settle_job(storage, WORK, [killed], prices, NOW).written == 1
    assert spent_micro_usd(storage, WORK, "acme", month) == 10_000
    assert settle_job(storage, WORK, [killed], prices, NOW).written == 0  # never twice
    record_spend(storage, WORK, attempt(0, 1, "failed", 0, 20, hourly_price=3.6), prices, NOW)
    assert spent_micro_usd(storage, WORK, "acme", month) == 20_000
    # a single-tenant job bills nobody
    other = SegmentAttempt(job_id="clip-0123456789abcdef", index=0, status="failed", started_at=EPOCH, finished_at=NOW)
    assert record_spend(storage, WORK, other, prices, NOW) is None
    keys = storage.list_keys(WORK, tenant_layout.spend_prefix("acme", month))
    assert [tenant_layout.parse_spend_entry_key(key).micro_usd for key in keys] == [20_000]  # type: ignore[union-attr]


def test_a_budget_is_over_once_the_ledger_reaches_it_and_a_raised_cap_lifts_it() -> None:
    storage, prices = FakeStorage(), GpuPrices(on_demand=3.6)
    month = month_of(EPOCH)
    settings = TenantSettings(tenant="acme", monthly_budget_usd=0.05)
    record_spend(storage, WORK, attempt(0, 1, "succeeded", 0, 40, hourly_price=3.6), prices, NOW)  # $0.04
    assert not budget.check(storage, WORK, settings, month, NOW).over
    assert not budget.is_over(storage, WORK, settings, month)
    record_spend(storage, WORK, attempt(1, 1, "succeeded", 0, 20, hourly_price=3.6), prices, NOW)  # $0.06
    status = budget.check(storage, WORK, settings, month, NOW)
    assert status.over and status.spent_usd == pytest.approx(0.06)
    assert budget.is_over(storage, WORK, settings, month)
    assert budget.claim_notice(storage, WORK, settings, month, NOW)
    assert not budget.claim_notice(storage, WORK, settings, month, NOW)  # told once
    raised = settings.model_copy(update={"monthly_budget_usd": 0.10})
    assert not budget.is_over(storage, WORK, raised, month)
    assert not budget.is_over(storage, WORK, settings, "2099-01")
