"""Jobs that wait (the read model, a cancel while waiting), the watchdog's tenant round (budgets: one
notice, hold or cancel), and what follows a job's final notice (its final webhook event, the next job)."""

from __future__ import annotations

import json
from dataclasses import replace

from fusionfleet import layout, tenant_layout
from fusionfleet.adapters.orchestrator import Execution, execution_arn
from fusionfleet.fleet.tenant_settings import BudgetAction, TenantSettings, write_settings
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.jobs.cost import GpuPrices
from fusionfleet.jobs.ledger import month_of, spent_micro_usd
from fusionfleet.jobs.waiting import WaitingRecord, enqueue, read_waiting, waiting_in_order
from fusionfleet.messages import SegmentAttempt
from fusionfleet.services.admission import AdmissionConfig, Admitter
from fusionfleet.services.job_end import JobEnded
from fusionfleet.services.tenant_overview import tenant_overview
from fusionfleet.services.tenant_sweep import BUDGET_HOLD_ERROR, TenantSweep
from fusionfleet.services.watchdog import Watchdog
from fusionfleet.webhooks.events import WebhookSubscription
from fusionfleet.webhooks.outbox import WebhookOutbox, write_subscription
from tests.support.farm import MACHINE, NOW, Farm
from tests.support.jobs import WORK, watchdog_config
from tests.support.webhook_fakes import FakeOrderedQueue

EVENTS = "q/webhooks.fifo"


def waiting(farm: Farm, job_id: str, order: int, tenant: str = "acme") -> WaitingRecord:
    record = WaitingRecord(
        job_id=job_id, tenant=tenant, order=order, execution_name=job_id, execution_input={"job": {"run": 0}},
        waiting_since=NOW.isoformat(), reason="waiting: tenant acme is running 1 of the 1 jobs it may run at once",
    )  # fmt: skip
    enqueue(farm.storage, WORK, record)
    return record


def sweep(farm: Farm) -> TenantSweep:
    admitter = Admitter(farm.storage, farm.orchestrator, AdmissionConfig(WORK, MACHINE), resume=farm.ops.resume,
                        clock=farm.clock)  # fmt: skip
    return TenantSweep(farm.storage, farm.orchestrator, farm.notifier, WORK, MACHINE, "topic", admitter,
                       cancel=farm.ops.cancel, clock=farm.clock)  # fmt: skip


def test_a_queued_job_reads_waiting_with_its_reason_and_is_listed() -> None:
    farm = Farm()
    farm.job("acme_a-0123456789abcdef", "RUNNING")
    farm.job("acme_b-0123456789abcdef", "RUNNING")
    arn = execution_arn(MACHINE, "acme_b-0123456789abcdef")
    del farm.orchestrator.states[arn]  # b never started: it waits
    waiting(farm, "acme_b-0123456789abcdef", 1)
    summary = farm.reader.view("acme_b-0123456789abcdef")
    assert summary.state == "WAITING" and "running 1 of the 1 jobs" in summary.reason
    assert [job.job_id for job in farm.reader.list_jobs(state="WAITING")] == ["acme_b-0123456789abcdef"]


def test_a_waiting_job_can_be_cancelled_with_one_notice_and_leaves_the_queue() -> None:
    farm = Farm()
    farm.job("acme_b-0123456789abcdef", "RUNNING")
    del farm.orchestrator.states[execution_arn(MACHINE, "acme_b-0123456789abcdef")]
    waiting(farm, "acme_b-0123456789abcdef", 1)
    message = farm.ops.cancel("acme_b-0123456789abcdef")
    assert "cancelled while it waited" in message
    assert farm.reader.view("acme_b-0123456789abcdef").state == "CANCELLED"
    assert waiting_in_order(farm.storage, WORK, "acme") == []
    ((_topic, _subject, notice),) = farm.notifier.published
    assert notice["status"] == "cancelled" and notice["job_id"] == "acme_b-0123456789abcdef"


def over_budget(farm: Farm, action: BudgetAction) -> None:
    write_settings(
        farm.storage, WORK, TenantSettings(tenant="acme", monthly_budget_usd=0.01, on_budget=action), TenantLimits()
    )  # fmt: skip
    month = month_of(farm.clock())
    farm.storage.put_json(
        WORK, tenant_layout.spend_entry_key("acme", month, "acme_a-0123456789abcdef", 0, 0, 1, 0, 12_000), {}
    )


def test_a_tenant_over_its_budget_is_told_once_and_its_running_job_is_held_to_resume() -> None:
    # GIVEN acme over its $0.01 budget with one job running (on_budget: stop)
    farm = Farm()
    farm.job("acme_a-0123456789abcdef", "RUNNING")
    farm.orchestrator.states[execution_arn(MACHINE, "acme_a-0123456789abcdef")] = Execution(
        execution_arn(MACHINE, "acme_a-0123456789abcdef"), "RUNNING",
        input=farm.orchestrator.states[execution_arn(MACHINE, "acme_a-0123456789abcdef")].input,
    )  # fmt: skip
    over_budget(farm, "stop")
    # AND an operator looking at the tenant first: what people are shown writes nothing (no marker)
    shown = tenant_overview(farm.storage, farm.orchestrator, WORK, MACHINE, "acme", NOW.timestamp())
    assert shown.spend.over and not farm.storage.list_keys(WORK, tenant_layout.BUDGET_PREFIX)
    # WHEN two rounds run
    first, second = sweep(farm).sweep(), sweep(farm).sweep()
    # THEN the job was held (stopped, queued to resume, reading WAITING) and the tenant told once, naming the budget
    assert first.held == ["acme_a-0123456789abcdef"] and first.over_budget == ["acme"]
    assert second.over_budget == [] and second.held == []
    assert farm.orchestrator.stopped == [(execution_arn(MACHINE, "acme_a-0123456789abcdef"), BUDGET_HOLD_ERROR)]
    held = read_waiting(farm.storage, WORK, "acme_a-0123456789abcdef")
    assert held is not None and held.resume and "monthly budget of $0.0100" in held.reason
    assert farm.reader.view("acme_a-0123456789abcdef").state == "WAITING"
    # AND the watchdog leaves the stopped execution alone, stopping or stopped: the job has not ended
    arn = execution_arn(MACHINE, "acme_a-0123456789abcdef")
    stopped = farm.orchestrator.states[arn]
    watchdog = Watchdog(farm.storage, farm.orchestrator, farm.notifier, watchdog_config(WORK, MACHINE, "topic"))
    for status in ("RUNNING", "ABORTED"):
        farm.orchestrator.states[arn] = replace(stopped, status=status)
        assert watchdog.sweep() == []
    farm.orchestrator.states[arn] = stopped
    (notice,) = [message for _topic, _subject, message in farm.notifier.published]
    assert notice["status"] == "budget" and notice["tenant"] == "acme" and notice["budget_usd"] == 0.01
    assert "$0.0120 of its monthly budget of $0.0100" in notice["reason"]
    # AND when the budget is raised, the next round resumes it as its next run
    write_settings(farm.storage, WORK, TenantSettings(tenant="acme", monthly_budget_usd=1.0), TenantLimits())
    third = sweep(farm).sweep()
    assert third.admitted == {"acme": ["acme_a-0123456789abcdef"]}
    assert read_waiting(farm.storage, WORK, "acme_a-0123456789abcdef") is None
    assert execution_arn(MACHINE, "acme_a-0123456789abcdef--r1") in farm.orchestrator.starts


def test_a_tenant_that_cancels_on_its_budget_has_its_running_job_cancelled_naming_it() -> None:
    farm = Farm()
    farm.job("acme_a-0123456789abcdef", "RUNNING")
    over_budget(farm, "cancel")
    result = sweep(farm).sweep()
    assert result.cancelled == ["acme_a-0123456789abcdef"]
    summary = farm.reader.view("acme_a-0123456789abcdef")
    assert summary.state == "CANCELLED" and "monthly budget" in summary.reason
    notices = [message for _topic, _subject, message in farm.notifier.published]
    assert sorted(notice["status"] for notice in notices) == ["budget", "cancelled"]
    assert "monthly budget" in next(n for n in notices if n["status"] == "cancelled")["reason"]


def test_a_final_notice_queues_the_final_event_bills_killed_attempts_and_starts_the_next_job() -> None:
    # GIVEN acme's job a, ended with a killed attempt, and job b waiting behind it
    farm = Farm()
    farm.job("acme_a-0123456789abcdef", "SUCCEEDED")
    killed = SegmentAttempt(
        job_id="acme_a-0123456789abcdef", index=0, attempt=1, status="running", started_at=NOW.timestamp() - 100,
        alive_at=NOW.timestamp() - 60, hourly_price=3.6,
    )  # fmt: skip
    farm.storage.put_json(WORK, layout.attempt_record_key(killed.job_id, 0, 0, 1), killed.model_dump())
    write_subscription(
        farm.storage, WORK, WebhookSubscription(job_id="acme_a-0123456789abcdef", url="https://h.example.com/x")
    )
    farm.job("acme_b-0123456789abcdef", "RUNNING")
    del farm.orchestrator.states[execution_arn(MACHINE, "acme_b-0123456789abcdef")]
    waiting(farm, "acme_b-0123456789abcdef", 1)
    ordered = FakeOrderedQueue()
    outbox = WebhookOutbox(ordered, EVENTS, farm.storage, WORK)
    admitter = Admitter(farm.storage, farm.orchestrator, AdmissionConfig(WORK, MACHINE, TenantLimits(1)), outbox)
    follower = JobEnded(farm.storage, WORK, outbox, admitter, GpuPrices(), clock=farm.clock)
    notice = {"status": "succeeded", "job_id": "acme_a-0123456789abcdef", "tenant": "acme", "stage": "done"}
    # WHEN its notice is followed, twice (SNS delivers at least once)
    first = follower.handle(notice)
    follower.handle(notice)
    # THEN one final event was queued (the same id twice, deduplicated), the killed attempt billed to
    # its last sign of life (40 s at $3.60/h), and b started
    assert first is not None and first.started == ("acme_b-0123456789abcdef",) and first.settled == 1
    finals = [json.loads(sent.body) for sent in ordered.sent if json.loads(sent.body)["kind"] == "succeeded"]
    assert [event["event_id"] for event in finals] == ["acme_a-0123456789abcdef.r0.succeeded"]
    assert spent_micro_usd(farm.storage, WORK, "acme", month_of(killed.started_at)) == 40_000
    # AND a budget notice is not a job's: nothing follows it
    assert follower.handle({"status": "budget", "tenant": "acme"}) is None
