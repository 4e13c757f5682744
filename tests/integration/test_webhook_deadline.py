"""Issue 45: a slow webhook receiver cannot hold one POST past its timeout, nor a batch past the
job-events function's own timeout (a batch that timed out came back whole: duplicate deliveries)."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from functions.job_events.app import DEADLINE_MARGIN_S, deliver
from fusionfleet.adapters.webhook_http import PinnedSender
from fusionfleet.services.webhooks import WebhookConfig, WebhookDeliverer
from fusionfleet.webhooks.addresses import AddressPolicy, check_url, resolve
from fusionfleet.webhooks.events import WebhookEvent, WebhookSubscription, event_id
from fusionfleet.webhooks.outbox import write_subscription
from fusionfleet.webhooks.retry import WebhookRetryPolicy
from fusionfleet.webhooks.secrets import TenantSecrets
from tests.support.fakes import FakeQueue, FakeStorage
from tests.support.webhook_fakes import FakeSecretStore

LOCAL = AddressPolicy(allow_loopback=True, require_https=False)
QUEUE = "q/webhooks.fifo"
WORK = "work"
pytestmark = pytest.mark.timeout(60)


class Trickler(http.server.BaseHTTPRequestHandler):
    """Sends its status line, then a header every 0.3 s: each read is quick, the whole answer is not."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            for n in range(40):
                self.wfile.write(f"X-Slow-{n}: {n}\r\n".encode())
                self.wfile.flush()
                time.sleep(0.3)
            self.wfile.write(b"Content-Length: 0\r\n\r\n")
        except OSError:
            pass  # the sender hung up

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def slow() -> Iterator[int]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Trickler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield int(httpd.server_address[1])
    httpd.shutdown()
    httpd.server_close()


def only_loopback(host: str, port: int) -> Sequence[str]:
    return ["127.0.0.1"]


def test_a_trickling_receiver_is_cut_off_at_the_attempts_timeout(slow: int) -> None:
    target = resolve(check_url(f"http://hooks.test:{slow}/in", LOCAL), LOCAL, only_loopback)
    began = time.monotonic()
    # WHEN a POST whose every socket operation answers within 1 s takes 12 s in all
    answer = PinnedSender().post(target, b"{}", {}, timeout_s=1.0)
    took = time.monotonic() - began
    # THEN it ends at its 1 s bound, as no answer
    assert took < 1.8, took
    assert answer.status is None and "within 1 s" in answer.error


def record(queue: FakeQueue, job: str) -> dict[str, Any]:
    body = WebhookEvent(event_id=event_id(job, 0, "started"), job_id=job, kind="started", occurred_at=1.0)
    text = body.model_dump_json()
    queue.send(QUEUE, text)
    (message,) = [m for m in queue.receive(QUEUE, 0, 120, max_messages=10) if m.body == text]
    return {"messageId": message.message_id, "receiptHandle": message.receipt_handle, "body": text,
            "attributes": {"MessageGroupId": job, "ApproximateReceiveCount": "1"}}  # fmt: skip


def test_a_batch_to_a_slow_receiver_ends_inside_the_functions_time_and_hands_the_rest_back(slow: int) -> None:
    # GIVEN five jobs' events to one slow receiver, attempts of 10 s, and 14 s left of the invocation
    storage, queue = FakeStorage(), FakeQueue()
    queue.create(QUEUE)
    batch = []
    for n in range(5):
        job = f"job-{n}"
        write_subscription(storage, WORK, WebhookSubscription(job_id=job, url=f"http://hooks.test:{slow}/in"))
        batch.append(record(queue, job))
    config = WebhookConfig(work_bucket=WORK, addresses=LOCAL, retry=WebhookRetryPolicy(timeout_s=10.0))
    deliverer = WebhookDeliverer(storage, TenantSecrets(FakeSecretStore(), "p"), PinnedSender(), only_loopback, config)
    deadline = time.monotonic() + DEADLINE_MARGIN_S + 4.0
    began = time.monotonic()
    # WHEN the batch is delivered
    kept = deliver(batch, deliverer, queue, QUEUE, time_left_s=lambda: deadline - time.monotonic())
    took = time.monotonic() - began
    # THEN it ended with the margin still left (not at 5 × 12 s), the first attempt cut at what was left
    assert took < 4.0 + 1.0, took
    # AND every event is left on the queue: the first for its retry, the rest handed back unsent at once
    assert kept == [r["messageId"] for r in batch]
    changes = dict(queue.visibility_changes)
    assert changes[batch[0]["messageId"]] > 0
    assert [changes[r["messageId"]] for r in batch[1:]] == [0, 0, 0, 0]
