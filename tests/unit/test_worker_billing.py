"""What a render worker adds for the bill and the tenant: priced attempt records, a sign of life while it
works, the tenant's ledger and budget, the budget held at take, and webhook events as segments finish."""

from __future__ import annotations

import json
import threading
import time

from fusionfleet import layout, tenant_layout
from fusionfleet.fleet import budget
from fusionfleet.fleet.tenant_settings import TenantSettings, write_settings
from fusionfleet.fleet.tenants import TenantLimits
from fusionfleet.jobs.cost import GpuPrices
from fusionfleet.jobs.ledger import month_of, spent_micro_usd
from fusionfleet.jobs.plan import Segment
from fusionfleet.messages import RenderTask
from fusionfleet.webhooks.events import WebhookSubscription
from fusionfleet.webhooks.outbox import WebhookOutbox, write_subscription
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.accounting import Billing
from gpu_worker.delivery.facts import Alive
from gpu_worker.delivery.keeper import KeepPolicy
from gpu_worker.delivery.loop import Worker
from gpu_worker.delivery.retry import RetryPolicy
from gpu_worker.delivery.tasks import RenderHandler
from gpu_worker.lifecycle.stopping import StopSignal
from tests.support.fakes import FakeOrchestrator, FakeQueue, FakeStorage
from tests.support.jobs import WORK, job_context
from tests.support.scripted import ScriptedRenderer, render_interrupted
from tests.support.webhook_fakes import FakeOrderedQueue

JOB = "acme_clip-0123456789abcdef"
QUEUE = "https://sqs.fake/render-normal"
EVENTS = "https://sqs.fake/webhooks.fifo"


def task(index: int = 1) -> RenderTask:
    job = job_context(JOB, tenant="acme", segment_count=4)
    return RenderTask(task_token="t", job=job, segment=Segment(index, 25, 50, 1_000_000, 2_000_000))


def test_an_attempt_carries_its_workers_price_and_bills_its_tenant_when_it_ends() -> None:
    storage = FakeStorage()
    billing = Billing(storage, "spot", GpuPrices(on_demand=3.6, spot=1.8))
    handler = RenderHandler(ScriptedRenderer(), storage, "w1", threading.Event(), billing=billing)
    handler.execute(task(), threading.Event(), Attempt(number=1))
    record = storage.json(WORK, layout.attempt_record_key(JOB, 1, 0, 1))
    assert (record["capacity"], record["hourly_price"], record["status"]) == ("spot", 1.8, "succeeded")
    month = month_of(record["started_at"])
    (entry,) = storage.list_keys(WORK, tenant_layout.spend_prefix("acme", month))
    parsed = tenant_layout.parse_spend_entry_key(entry)
    assert parsed is not None and parsed.job_id == JOB and parsed.index == 1
    seconds = record["finished_at"] - record["started_at"]
    assert abs(parsed.micro_usd - seconds / 3600 * 1.8 * 1e6) <= 1


def test_the_running_attempt_is_stamped_alive_until_it_ends_and_never_after() -> None:
    storage = FakeStorage()
    gate, release = threading.Event(), threading.Event()

    class Slow(ScriptedRenderer):
        def render(self, task, attempt, cancel, stopping):  # type: ignore[no-untyped-def]
            gate.set()
            release.wait(5)
            return super().render(task, attempt, cancel, stopping)

    handler = RenderHandler(
        Slow(), storage, "w1", threading.Event(), billing=Billing(storage, "on-demand", GpuPrices())
    )
    one = task()
    worker = threading.Thread(target=handler.execute, args=(one, threading.Event(), Attempt(number=1)))
    worker.start()
    assert gate.wait(5)
    time.sleep(0.05)
    handler.note(one, Alive())
    key = layout.attempt_record_key(JOB, 1, 0, 1)
    running = storage.json(WORK, key)
    assert running["status"] == "running" and running["alive_at"] > running["started_at"]
    release.set()
    worker.join(5)
    handler.note(one, Alive())  # a late refresh must not undo the end
    assert storage.json(WORK, key)["status"] == "succeeded"


def test_a_tenant_over_its_budget_has_its_queued_segments_handed_back_unrendered() -> None:
    # GIVEN acme, whose $0.01 budget is spent this month
    storage, queue, orchestrator, renderer = FakeStorage(), FakeQueue(), FakeOrchestrator(), ScriptedRenderer()
    settings = write_settings(storage, WORK, TenantSettings(tenant="acme", monthly_budget_usd=0.01), TenantLimits())
    month = month_of(time.time())
    storage.put_json(WORK, tenant_layout.spend_entry_key("acme", month, JOB, 0, 0, 1, 0, 20_000), {})
    assert budget.check(storage, WORK, settings, month, time.time()).over
    queue.create(QUEUE)
    message_id = queue.send(QUEUE, task().model_dump_json())
    handler = RenderHandler(
        renderer, storage, "w", threading.Event(), billing=Billing(storage, "on-demand", GpuPrices())
    )
    worker = Worker(
        "w", [QUEUE], handler, queue, orchestrator, RetryPolicy(max_attempts=3),
        KeepPolicy(visibility_s=600, cancel_check_s=0.2), StopSignal(), idle_wait_s=0,
    )  # fmt: skip
    # WHEN a worker takes one of its segments
    message = worker.take()
    assert message is not None
    worker.execute(message)
    # THEN no engine time is spent, and the task goes back as a new message with no attempt spent (the
    # watchdog holds the job; the first worker to take it after the stop finds its token gone)
    assert renderer.rendered == 0 and queue.deleted == [message_id]
    assert orchestrator.reports() == []
    (again,) = queue.receive(QUEUE, 0, 600)
    assert RenderTask.model_validate_json(again.body).prior_attempts == 0
    assert spent_micro_usd(storage, WORK, "acme", month) == 20_000


def test_the_attempt_that_reaches_the_cap_marks_the_tenant_over_budget() -> None:
    storage = FakeStorage()
    write_settings(storage, WORK, TenantSettings(tenant="acme", monthly_budget_usd=0.000001), TenantLimits())
    billing = Billing(storage, "on-demand", GpuPrices(on_demand=3600.0))  # a dollar a second

    class Brief(ScriptedRenderer):
        def render(self, task, attempt, cancel, stopping):  # type: ignore[no-untyped-def]
            time.sleep(0.05)
            return super().render(task, attempt, cancel, stopping)

    assert billing.held(task().job) is None
    handler = RenderHandler(Brief(), storage, "w1", threading.Event(), billing=billing)
    handler.execute(task(), threading.Event(), Attempt(number=1))
    assert billing.held(task().job) is not None and "monthly budget of $0.0000" in str(billing.held(task().job))


def test_a_finished_segment_queues_progress_and_preview_events_for_a_job_that_asked() -> None:
    storage, ordered = FakeStorage(), FakeOrderedQueue()
    write_subscription(storage, WORK, WebhookSubscription(job_id=JOB, url="https://h.example.com/x"))
    events = WebhookOutbox(ordered, EVENTS, storage, WORK)
    handler = RenderHandler(ScriptedRenderer(), storage, "w1", threading.Event(), events=events)
    handler.execute(task(2), threading.Event(), Attempt(number=1))
    handler.execute(task(2), threading.Event(), Attempt(number=2))  # a redelivery: the same events, deduplicated
    assert [(sent.group, sent.dedup) for sent in ordered.sent] == [
        (JOB, f"{JOB}.r0.progress.00002"), (JOB, f"{JOB}.r0.preview.00002"),
    ]  # fmt: skip
    progress = json.loads(ordered.sent[0].body)
    assert progress["kind"] == "progress" and progress["data"]["segments_total"] == 4


def test_a_segment_in_flight_stops_within_seconds_of_the_budget_and_goes_back_unspent() -> None:
    # GIVEN acme with a budget, and a worker rendering one of its segments (a render that ends only when stopped)
    storage, queue, orchestrator = FakeStorage(), FakeQueue(), FakeOrchestrator()
    settings = write_settings(storage, WORK, TenantSettings(tenant="acme", monthly_budget_usd=0.01), TenantLimits())
    queue.create(QUEUE)
    message_id = queue.send(QUEUE, task().model_dump_json())
    billing = Billing(storage, "on-demand", GpuPrices())
    handler = RenderHandler(ScriptedRenderer("wait"), storage, "w", threading.Event(), billing=billing)
    # WHEN another attempt takes the month past the cap while it renders

    def spend() -> None:
        month = month_of(time.time())
        storage.put_json(WORK, tenant_layout.spend_entry_key("acme", month, JOB, 0, 0, 1, 0, 20_000), {})
        budget.check(storage, WORK, settings, month, time.time())

    render_interrupted(handler, queue, orchestrator, QUEUE, spend)
    # THEN it stopped within seconds (that helper holds it to 5), reported nothing, and its task went back as
    # a new message
    assert orchestrator.reports() == [] and queue.deleted == [message_id]
    assert storage.json(WORK, layout.attempt_record_key(JOB, 1, 0, 1))["status"] == "cancelled"
    (again,) = queue.receive(QUEUE, 0, 600)
    assert RenderTask.model_validate_json(again.body).prior_attempts == 0
