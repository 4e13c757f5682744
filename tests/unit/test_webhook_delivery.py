"""The webhook deliverer: one event → a signed POST, retried with backoff, recorded, never sent twice."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import pytest
from standardwebhooks.webhooks import Webhook

from fusionfleet import layout
from fusionfleet.jobs.segment_files import SegmentFiles
from fusionfleet.jobs.states import NoticeStatus
from fusionfleet.services.webhooks import WebhookConfig, WebhookDeliverer
from fusionfleet.webhooks.addresses import AddressPolicy
from fusionfleet.webhooks.events import EventKind, WebhookEvent, WebhookSubscription, event_id
from fusionfleet.webhooks.outbox import write_subscription
from fusionfleet.webhooks.records import deliveries, read_delivery
from fusionfleet.webhooks.retry import WebhookRetryPolicy
from fusionfleet.webhooks.secrets import TenantSecrets
from tests.support.fakes import Clock, FakeStorage
from tests.support.webhook_fakes import FakeSecretStore, FakeSender

BUCKET = "work"
JOB = "acme_clip-0123456789abcdef"


def lookup(host: str, port: int) -> Sequence[str]:
    return {"hooks.example.com": ["93.184.216.34"]}[host]


@pytest.fixture
def storage() -> FakeStorage:
    store = FakeStorage()
    write_subscription(
        store, BUCKET,
        WebhookSubscription(job_id=JOB, tenant="acme", url="https://hooks.example.com/in", metadata={"shot": 42}),
    )  # fmt: skip
    return store


def deliverer(storage: FakeStorage, sender: FakeSender, clock: Clock, secrets: TenantSecrets,
              **config: object) -> WebhookDeliverer:  # fmt: skip
    settings = WebhookConfig(work_bucket=BUCKET, addresses=AddressPolicy(), **config)  # type: ignore[arg-type]
    return WebhookDeliverer(storage, secrets, sender, lookup, settings, clock=clock, rand=lambda: 0.0)


def event(kind: EventKind, clock: Clock, part: str = "", **data: object) -> WebhookEvent:
    return WebhookEvent(event_id=event_id(JOB, 0, kind, part), job_id=JOB, kind=kind, occurred_at=clock(), data=data)


def test_a_receiver_failing_twice_gets_the_same_signed_event_three_times(storage: FakeStorage) -> None:
    # GIVEN a receiver that answers 500, then times out, then 200 (on today's clock: the library checks
    # that a timestamp is recent)
    clock, sender = Clock(time.time()), FakeSender([500, None, 200])
    secrets = TenantSecrets(FakeSecretStore(), "fusionfleet/test/webhooks")
    worker = deliverer(storage, sender, clock, secrets)
    final = event(NoticeStatus.SUCCEEDED, clock, output={"key": "tenants/acme/outputs/clip.mp4"}, reason="")
    # WHEN the deliverer is handed the event, and again after each pause it asks for
    first = worker.handle(final)
    clock.advance(first.delay_s)
    second = worker.handle(final)
    clock.advance(second.delay_s)
    third = worker.handle(final)
    # THEN it retried after the schedule's pauses and delivered on the third attempt
    assert (first.outcome, first.delay_s) == ("retry", 5)
    assert (second.outcome, second.delay_s) == ("retry", 30)
    assert third.outcome == "delivered"
    # with one webhook-id and one body, each attempt signed afresh with its own timestamp
    assert {post.headers["webhook-id"] for post in sender.posts} == {f"{JOB}.r0.succeeded"}
    assert len({post.body for post in sender.posts}) == 1
    assert [post.headers["webhook-timestamp"] for post in sender.posts] == sorted(
        {post.headers["webhook-timestamp"] for post in sender.posts}
    )
    secret = str(secrets.secret_for("acme"))
    for post in sender.posts:
        body = Webhook(secret).verify(post.body, post.headers)
        assert body["type"] == "job.succeeded"
        assert body["data"]["metadata"] == {"shot": 42}
        assert body["data"]["state"] == "SUCCEEDED"
        assert body["data"]["sequence"] == 1
    # and the record tells every attempt
    record = read_delivery(storage, BUCKET, JOB, final.event_id)
    assert record is not None and record.state == "delivered"
    assert [(a.number, a.status) for a in record.attempts] == [(1, 500), (2, None), (3, 200)]
    assert record.attempts[1].error == "timed out"


def test_a_duplicate_of_a_delivered_event_is_dropped(storage: FakeStorage) -> None:
    clock, sender = Clock(), FakeSender()
    worker = deliverer(storage, sender, clock, TenantSecrets(FakeSecretStore(), "p"))
    final = event(NoticeStatus.FAILED, clock, reason="segment 3 failed")
    assert worker.handle(final).outcome == "delivered"
    assert worker.handle(final).outcome == "duplicate"
    assert len(sender.posts) == 1


def test_nothing_follows_the_final_event_of_a_run(storage: FakeStorage) -> None:
    clock, sender = Clock(), FakeSender()
    worker = deliverer(storage, sender, clock, TenantSecrets(FakeSecretStore(), "p"))
    assert worker.handle(event(NoticeStatus.CANCELLED, clock, reason="cancelled")).outcome == "delivered"
    late = worker.handle(event("progress", clock, "00004", segments_total=8))
    assert late.outcome == "skipped" and "final event" in late.reason
    assert worker.handle(event(NoticeStatus.FAILED, clock)).outcome == "skipped"
    assert len(sender.posts) == 1


def test_progress_counts_segments_as_the_read_model_does_pictures_included(storage: FakeStorage) -> None:
    # GIVEN a job of image targets: its segments' outputs are pictures, one done, one failed (a record alone)
    clock, sender = Clock(), FakeSender()
    worker = deliverer(storage, sender, clock, TenantSecrets(FakeSecretStore(), "p"), progress_every_s=0.0)
    storage.put_bytes(BUCKET, layout.segment_key(JOB, 0, "png"), b"png")
    storage.put_json(BUCKET, layout.segment_record_key(JOB, 0), {"status": "succeeded"})
    storage.put_json(BUCKET, layout.segment_record_key(JOB, 1), {"status": "failed"})
    # WHEN its progress is sent
    assert worker.handle(event("progress", clock, "00000", segments_total=3)).outcome == "delivered"
    # THEN the webhook counts what `fusionfleet status` counts (the picture is a done segment's output)
    sent = json.loads(sender.posts[0].body)["data"]["segments"]
    files = SegmentFiles.of(storage.list_keys(BUCKET, layout.segments_prefix(JOB)))
    assert (
        sent
        == {"done": len(files.done), "failed": len(files.failed), "total": 3}
        == {"done": 1, "failed": 1, "total": 3}
    )


def test_progress_is_sent_only_when_it_moved_with_the_sequence_counting_up(storage: FakeStorage) -> None:
    clock, sender = Clock(), FakeSender()
    worker = deliverer(storage, sender, clock, TenantSecrets(FakeSecretStore(), "p"), progress_every_s=0.0)
    assert worker.handle(event("started", clock, segments_total=4)).outcome == "delivered"
    for index in (0, 1):
        storage.put_bytes(BUCKET, layout.segment_key(JOB, index), b"mp4")
        storage.put_json(BUCKET, layout.segment_record_key(JOB, index), {"status": "succeeded"})
    clock.advance(1)
    assert worker.handle(event("progress", clock, "00000", segments_total=4)).outcome == "delivered"
    clock.advance(1)
    unchanged = worker.handle(event("progress", clock, "00001", segments_total=4))
    assert unchanged.outcome == "skipped"
    bodies = [json.loads(post.body) for post in sender.posts]
    assert [body["data"]["sequence"] for body in bodies] == [1, 2]
    assert bodies[1]["data"]["segments"] == {"done": 2, "failed": 0, "total": 4}
    assert [record.kind for record in deliveries(storage, BUCKET, JOB)] == ["started", "progress"]


def test_a_url_leading_to_a_private_address_is_never_called(storage: FakeStorage) -> None:
    write_subscription(storage, BUCKET, WebhookSubscription(job_id=JOB, tenant="acme", url="https://10.0.0.5/in"))
    clock, sender = Clock(), FakeSender()
    handled = deliverer(storage, sender, clock, TenantSecrets(FakeSecretStore(), "p")).handle(
        event(NoticeStatus.FAILED, clock)
    )
    assert handled.outcome == "failed" and "private address" in handled.reason
    assert sender.posts == []


def test_a_receiver_that_refuses_with_4xx_is_not_tried_again(storage: FakeStorage) -> None:
    clock, sender = Clock(), FakeSender([404])
    handled = deliverer(storage, sender, clock, TenantSecrets(FakeSecretStore(), "p")).handle(
        event(NoticeStatus.FAILED, clock)
    )
    assert handled.outcome == "failed" and "answered 404" in handled.reason


def test_it_gives_up_after_the_last_scheduled_attempt(storage: FakeStorage) -> None:
    clock, sender = Clock(), FakeSender([503] * 10)
    worker = deliverer(
        storage, sender, clock, TenantSecrets(FakeSecretStore(), "p"), retry=WebhookRetryPolicy(delays_s=(1, 2))
    )
    outcomes = []
    for _ in range(3):
        handled = worker.handle(event(NoticeStatus.SUCCEEDED, clock))
        outcomes.append(handled.outcome)
        clock.advance(handled.delay_s)
    assert outcomes == ["retry", "retry", "failed"]
    assert worker.handle(event(NoticeStatus.SUCCEEDED, clock)).outcome == "duplicate"


def test_an_event_the_job_did_not_ask_for_is_not_sent(storage: FakeStorage) -> None:
    write_subscription(
        storage,
        BUCKET,
        WebhookSubscription(job_id=JOB, url="https://hooks.example.com/in", events=(NoticeStatus.SUCCEEDED,)),
    )
    clock, sender = Clock(), FakeSender()
    assert (
        deliverer(storage, sender, clock, TenantSecrets(FakeSecretStore(), "p")).handle(event("started", clock)).outcome
        == "skipped"
    )
    assert sender.posts == []


def test_each_tenant_gets_its_own_secret_made_once() -> None:
    store = FakeSecretStore()
    secrets = TenantSecrets(store, "fusionfleet/s/webhooks", cache_s=0)
    first = secrets.secret_for("acme")
    assert secrets.secret_for("acme") == first
    assert secrets.secret_for("globex") != first
    assert secrets.secret_for(None) not in (first,)
    assert sorted(store.values) == [
        "fusionfleet/s/webhooks/_default", "fusionfleet/s/webhooks/acme", "fusionfleet/s/webhooks/globex",
    ]  # fmt: skip


def test_an_event_waits_behind_one_of_its_job_waiting_for_a_retry_so_they_arrive_in_order(storage: FakeStorage) -> None:
    # GIVEN the job's started event refused once (it waits 5 s for its retry)
    clock, sender = Clock(), FakeSender([503])
    worker = deliverer(storage, sender, clock, TenantSecrets(FakeSecretStore(), "p"))
    started, final = event("started", clock), event(NoticeStatus.SUCCEEDED, clock)
    assert worker.handle(started).outcome == "retry"
    # WHEN its final event comes meanwhile (a queue that does not hold the job's group back)
    held = worker.handle(final)
    # THEN it is not sent: it goes back until after the retry
    assert (held.outcome, held.delay_s) == ("deferred", 6) and len(sender.posts) == 1
    clock.advance(5)
    assert worker.handle(started).outcome == "delivered"
    clock.advance(1)
    assert worker.handle(final).outcome == "delivered"
    sent = [json.loads(post.body) for post in sender.posts]
    assert [(body["type"], body["data"]["sequence"]) for body in sent] == [
        ("job.started", 1), ("job.started", 1), ("job.succeeded", 2),
    ]  # fmt: skip
