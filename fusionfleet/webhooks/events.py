"""A job's webhook: what a job asks for (its subscription), the events the farm produces, and the
payload a receiver gets.

Producers (the slicer or the admitter when a job starts, the workers as segments finish and frames
are previewed, the notice bridge when the job's one final notice is published) put `WebhookEvent`s
on the job's ordered queue; the deliverer turns each into one payload, frozen at its first attempt,
so every retry sends the same bytes under the same `webhook-id`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from fusionfleet.jobs.states import NoticeStatus

# A job's final event is named as its final notice's status says it ended (fusionfleet.jobs.states).
EventKind = Literal[
    "started", "progress", "preview", NoticeStatus.SUCCEEDED, NoticeStatus.FAILED, NoticeStatus.CANCELLED
]
EVENT_KINDS: tuple[EventKind, ...] = get_args(EventKind)
FINAL_KINDS: tuple[EventKind, ...] = (NoticeStatus.SUCCEEDED, NoticeStatus.FAILED, NoticeStatus.CANCELLED)
TYPE_PREFIX = "job."  # a payload's `type`: job.started, job.progress, …
MAX_METADATA_BYTES = 4096


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WebhookSubscription(_Model):
    """What a job asked for, kept beside it (`work/<job>/webhook.json`) for the producers and the deliverer."""

    job_id: str
    tenant: str | None = None
    url: str | None = None  # None: metadata only, nothing is sent
    events: tuple[EventKind, ...] = EVENT_KINDS
    metadata: dict[str, Any] = Field(default_factory=dict)

    def wants(self, kind: EventKind) -> bool:
        return self.url is not None and kind in self.events


class WebhookEvent(_Model):
    """One thing that happened to a job, as it travels on the webhook queue."""

    event_id: str  # the `webhook-id` of every attempt to deliver it
    job_id: str
    run: int = 0
    kind: EventKind
    occurred_at: float  # epoch seconds, when the producer saw it
    data: dict[str, Any] = Field(default_factory=dict)

    @property
    def final(self) -> bool:
        return self.kind in FINAL_KINDS


def event_id(job_id: str, run: int, kind: EventKind, part: str = "") -> str:
    """Stable per event: a duplicate of the same event (a redelivered notice) gets the same id. Pure.

    Finals are one per run and kind; progress and previews add what distinguishes them (a segment,
    a frame)."""
    return f"{job_id}.r{run}.{kind}" + (f".{part}" if part else "")


def final_kind(notice_status: str) -> EventKind | None:
    """The final event of a notice's status (a `NoticeStatus`), or None."""
    return next((kind for kind in FINAL_KINDS if kind == notice_status), None)


def payload(event: WebhookEvent, subscription: WebhookSubscription, sequence: int, data: dict[str, Any]) -> bytes:
    """The body a receiver gets, in the Standard Webhooks shape `{type, timestamp, data}`. Pure.

    `sequence` counts the job's delivered events from 1 and `occurred_at` is when it happened, so a
    receiver can order events whatever the network does; the caller's `metadata` comes back as given.
    """
    body = {
        "type": TYPE_PREFIX + event.kind,
        "timestamp": datetime.fromtimestamp(event.occurred_at, UTC).isoformat(timespec="milliseconds"),
        "data": {
            "job_id": event.job_id,
            "tenant": subscription.tenant,
            "run": event.run,
            "sequence": sequence,
            "occurred_at": event.occurred_at,
            **data,
            "metadata": subscription.metadata,
        },
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode()


def metadata_problem(metadata: object) -> str | None:
    """Why a job's metadata cannot be kept, or None: a JSON object of at most MAX_METADATA_BYTES."""
    if not isinstance(metadata, dict):
        return f"must be a JSON object, not {type(metadata).__name__}"
    try:
        size = len(json.dumps(metadata, separators=(",", ":")).encode())
    except (TypeError, ValueError) as error:
        return f"must be JSON: {error}"
    if size > MAX_METADATA_BYTES:
        return f"is {size} bytes as JSON, over the limit of {MAX_METADATA_BYTES}"
    return None
