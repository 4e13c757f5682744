"""The job-events handler's webhook batch: a failed delivery stays for its pause, and its job's later
events in the batch go back at once behind it (their FIFO group keeps the order); other jobs go on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from functions.job_events.app import deliver
from fusionfleet.jobs.states import NoticeStatus
from fusionfleet.services.webhooks import WebhookConfig, WebhookDeliverer
from fusionfleet.webhooks.addresses import AddressPolicy
from fusionfleet.webhooks.events import EventKind, WebhookEvent, WebhookSubscription, event_id
from fusionfleet.webhooks.outbox import write_subscription
from fusionfleet.webhooks.secrets import TenantSecrets
from tests.support.fakes import Clock, FakeQueue, FakeStorage
from tests.support.webhook_fakes import FakeSecretStore, FakeSender

QUEUE = "q/webhooks.fifo"
WORK = "work"


def lookup(host: str, port: int) -> Sequence[str]:
    return ["93.184.216.34"]


def record(queue: FakeQueue, job: str, kind: EventKind) -> dict[str, Any]:
    body = WebhookEvent(event_id=event_id(job, 0, kind), job_id=job, kind=kind, occurred_at=1.0).model_dump_json()
    queue.send(QUEUE, body)
    (message,) = [m for m in queue.receive(QUEUE, 0, 120, max_messages=10) if m.body == body]
    return {"messageId": message.message_id, "receiptHandle": message.receipt_handle, "body": body,
            "attributes": {"MessageGroupId": job, "ApproximateReceiveCount": "1"}}  # fmt: skip


def test_a_retried_event_holds_its_jobs_later_events_back_and_lets_other_jobs_through() -> None:
    storage, queue, clock = FakeStorage(), FakeQueue(Clock()), Clock()
    queue.create(QUEUE)
    for job, url in (("job-a", "https://a.example.com/in"), ("job-b", "https://b.example.com/in")):
        write_subscription(storage, WORK, WebhookSubscription(job_id=job, url=url))
    # the first delivery (a's started) fails with 503; everything else answers 200
    sender = FakeSender([503])
    deliverer = WebhookDeliverer(
        storage, TenantSecrets(FakeSecretStore(), "p"), sender, lookup,
        WebhookConfig(work_bucket=WORK, addresses=AddressPolicy()), clock=clock, rand=lambda: 0.0,
    )  # fmt: skip
    batch = [
        record(queue, "job-a", "started"),
        record(queue, "job-a", NoticeStatus.SUCCEEDED),
        record(queue, "job-b", "started"),
    ]
    kept = deliver(batch, deliverer, queue, QUEUE)
    # a's started stays for its 5 s pause, a's final goes back unsent at once, b's started is delivered
    assert kept == [batch[0]["messageId"], batch[1]["messageId"]]
    assert dict(queue.visibility_changes) == {batch[0]["messageId"]: 5, batch[1]["messageId"]: 0}
    assert [post.target.host for post in sender.posts] == ["a.example.com", "b.example.com"]
