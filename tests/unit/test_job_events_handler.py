"""The job-events handler's batches, processed by Powertools: a failed webhook delivery stays for its pause,
and its job's later events in the batch go back at once behind it (their FIFO group keeps the order);
other jobs go on. A notice stays while a copy of its job still stops, or when following it failed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, cast

from functions.job_events.app import MAX_SETTLE_ROUNDS, deliver, follow
from fusionfleet.jobs.states import NoticeStatus
from fusionfleet.services.job_end import JobEnded
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


class Follower:
    """A notice follower whose answer for each job is scripted: unsettled (a copy still stopping) or raising."""

    def __init__(self, unsettled: set[str], raising: set[str]) -> None:
        self.unsettled, self.raising = unsettled, raising
        self.seen: list[str] = []

    def handle(self, notice: dict[str, Any]) -> Any:
        job = str(notice.get("job_id"))
        self.seen.append(job)
        if job in self.raising:
            raise RuntimeError("S3 down")
        return SimpleNamespace(unsettled=job in self.unsettled)


def notice_record(body: str, receives: int = 1) -> dict[str, Any]:
    return {"messageId": f"m-{len(body)}-{receives}-{body[-8:]}", "receiptHandle": "r", "body": body,
            "attributes": {"ApproximateReceiveCount": str(receives)}}  # fmt: skip


def test_a_notice_is_followed_again_while_a_copy_still_stops_and_when_following_it_failed() -> None:
    follower = Follower(unsettled={"settling"}, raising={"broken"})
    batch = [
        notice_record(json.dumps({"job_id": "done"})),
        notice_record(json.dumps({"job_id": "settling"})),
        notice_record(json.dumps({"job_id": "settling-late"}), receives=MAX_SETTLE_ROUNDS),
        notice_record(json.dumps({"job_id": "broken"})),
        notice_record("not json"),
    ]
    follower.unsettled.add("settling-late")
    kept = follow(batch, cast(JobEnded, follower))
    # THEN the unsettled notice and the one whose following raised stay; the third round of an unsettled
    # one does not (MAX_SETTLE_ROUNDS), nor does a body that is no notice (dropped, said)
    assert kept == [batch[1]["messageId"], batch[3]["messageId"]]
    assert follower.seen == ["done", "settling", "settling-late", "broken"]
    # AND a batch whose every notice stays is an answer, not an error of the function
    assert follow([batch[3]], cast(JobEnded, follower)) == [batch[3]["messageId"]]
