"""What the farm keeps about a job's webhook deliveries, beside the job in the work bucket.

One record per event (`work/<job>/webhooks/<event>.json`): the exact body sent, every attempt (when,
to which address, the answer or why there was none, how long it took) and how it ended. `fusionfleet
logs` and the dashboards read them. One state record per job (`…/webhooks/_state.json`) holds the
event sequence counter and what was last delivered, so progress that did not move is not sent twice
and nothing follows the final event. Only the deliverer writes them, and it handles one job's events
one at a time (they share a FIFO message group), so the records need no locking.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from fusionfleet import layout
from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import ObjectMissing
from fusionfleet.webhooks.events import EventKind

DeliveryState = Literal["pending", "delivered", "failed", "skipped"]


class _Record(BaseModel):
    # Read by dashboards and the CLI of other versions: a reader ignores fields a newer writer added.
    model_config = ConfigDict(extra="ignore", frozen=True)


class DeliveryAttempt(_Record):
    number: int
    at: float  # epoch seconds: the attempt's `webhook-timestamp`
    address: str = ""
    status: int | None = None  # None: no answer
    error: str = ""  # why there was no answer, or the start of the answer's body
    duration_s: float = 0.0


class DeliveryRecord(_Record):
    event_id: str
    job_id: str
    run: int = 0
    kind: EventKind
    url: str = ""
    sequence: int = 0
    occurred_at: float = 0.0
    body: str = ""  # exactly what every attempt sends
    state: DeliveryState = "pending"
    attempts: tuple[DeliveryAttempt, ...] = ()
    next_attempt_at: float = 0.0  # while pending after a failed attempt
    reason: str = ""  # why it failed or was skipped

    def view(self) -> dict[str, object]:
        """As the pages show it (the body left out: the receiver has it)."""
        return {
            "event": self.kind, "event_id": self.event_id, "sequence": self.sequence, "state": self.state,
            "reason": self.reason, "url": self.url,
            "attempts": [attempt.model_dump(mode="json") for attempt in self.attempts],
        }  # fmt: skip


class WebhookState(_Record):
    next_sequence: int = 1
    progress: tuple[int, int, int] | None = None  # (done, failed, total) last sent
    progress_at: float = 0.0
    preview_at: float = 0.0
    final_event: str = ""  # the final event's id, once one was accepted for delivery
    # The event waiting for its retry, and when: the job's later events wait behind it, so they arrive
    # in order whatever the queue does (an emulator may hand out a FIFO group's next message meanwhile).
    waiting_on: str = ""
    waiting_until: float = 0.0


def read_delivery(storage: Storage, bucket: str, job_id: str, event_id: str) -> DeliveryRecord | None:
    try:
        raw = storage.get_bytes(bucket, layout.webhook_delivery_key(job_id, event_id))
    except ObjectMissing:
        return None
    return DeliveryRecord.model_validate_json(raw)


def write_delivery(storage: Storage, bucket: str, record: DeliveryRecord) -> None:
    key = layout.webhook_delivery_key(record.job_id, record.event_id)
    storage.put_bytes(bucket, key, record.model_dump_json().encode(), "application/json")


def read_state(storage: Storage, bucket: str, job_id: str) -> WebhookState:
    try:
        return WebhookState.model_validate_json(storage.get_bytes(bucket, layout.webhook_state_key(job_id)))
    except ObjectMissing:
        return WebhookState()


def write_state(storage: Storage, bucket: str, job_id: str, state: WebhookState) -> None:
    storage.put_bytes(bucket, layout.webhook_state_key(job_id), state.model_dump_json().encode(), "application/json")


def deliveries(storage: Storage, bucket: str, job_id: str) -> list[DeliveryRecord]:
    """Every delivery record of the job, in the order the events were delivered (sequence, then time)."""
    found = []
    for key in storage.list_keys(bucket, layout.webhook_deliveries_prefix(job_id)):
        parsed = layout.parse_webhook_delivery_key(key)
        if parsed is None:
            continue
        try:
            found.append(DeliveryRecord.model_validate_json(storage.get_bytes(bucket, key)))
        except (ObjectMissing, ValueError):
            continue
    return sorted(found, key=lambda record: (record.sequence or 1 << 30, record.occurred_at))
