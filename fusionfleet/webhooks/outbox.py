"""How producers hand a job's webhook events to the deliverer: onto a FIFO queue, one message group
per job, so the job's events are delivered one at a time in the order they were produced, and a
retried delivery holds back the events behind it.

Only jobs that asked for an event get a message: producers look at the job's subscription first
(the slicer has it in hand; others read `work/<job>/webhook.json` once per job and keep it).
"""

from __future__ import annotations

import logging
import threading

from fusionfleet import layout
from fusionfleet.adapters.ordered_queue import OrderedQueue
from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import ObjectMissing
from fusionfleet.webhooks.events import WebhookEvent, WebhookSubscription

logger = logging.getLogger(__name__)
SUBSCRIPTIONS_KEPT = 256


def read_subscription(storage: Storage, bucket: str, job_id: str) -> WebhookSubscription | None:
    try:
        return WebhookSubscription.model_validate_json(storage.get_bytes(bucket, layout.webhook_key(job_id)))
    except ObjectMissing:
        return None


def write_subscription(storage: Storage, bucket: str, subscription: WebhookSubscription) -> None:
    key = layout.webhook_key(subscription.job_id)
    storage.put_bytes(bucket, key, subscription.model_dump_json().encode(), "application/json")


class WebhookOutbox:
    def __init__(self, queue: OrderedQueue, queue_url: str, storage: Storage, work_bucket: str) -> None:
        self._ordered = queue
        self._url = queue_url
        self._storage = storage
        self._bucket = work_bucket
        self._subscriptions: dict[str, WebhookSubscription | None] = {}
        self._lock = threading.Lock()

    def subscription(self, job_id: str) -> WebhookSubscription | None:
        """The job's subscription, read once per job (it never changes once the job is accepted)."""
        with self._lock:
            if job_id in self._subscriptions:
                return self._subscriptions[job_id]
        found = read_subscription(self._storage, self._bucket, job_id)
        with self._lock:
            if len(self._subscriptions) >= SUBSCRIPTIONS_KEPT:
                self._subscriptions.pop(next(iter(self._subscriptions)))
            self._subscriptions[job_id] = found
        return found

    def emit(self, event: WebhookEvent, subscription: WebhookSubscription | None = None) -> bool:
        """Queue the event if the job asked for its kind; True when queued."""
        wanted = subscription if subscription is not None else self.subscription(event.job_id)
        if wanted is None or not wanted.wants(event.kind):
            return False
        self._ordered.send_ordered(self._url, event.model_dump_json(), group=event.job_id, dedup=event.event_id)
        logger.info("webhook event %s queued", event.event_id)
        return True

    def emit_quietly(self, event: WebhookEvent) -> bool:
        """As `emit`, for producers whose own work must not fail with it (a worker's segment)."""
        try:
            return self.emit(event)
        except Exception:
            logger.warning("webhook event %s not queued", event.event_id, exc_info=True)
            return False
