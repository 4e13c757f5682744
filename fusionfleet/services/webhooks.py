"""The webhook deliverer: one queued event of a job → one signed POST, recorded, retried with backoff.

Run by the `webhooks` Lambda on AWS (its SQS FIFO event source) and by the local stack's event-source
runner: each message of the webhook queue is one `WebhookEvent`. The job's events share a message group,
so they come here one at a time and in order; a failed attempt keeps its message invisible for the
retry's pause (the caller changes its visibility), which holds the job's later events back too, so a
receiver sees a job's events in order even across retries. A duplicate (a redelivered message, a
notice bridged twice) finds its delivery record already ended and is dropped: the `webhook-id` and the
body of every attempt are those of the first.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from fusionfleet import layout
from fusionfleet.adapters.storage import Storage
from fusionfleet.adapters.webhook_http import Answer, WebhookSender
from fusionfleet.environment import settings
from fusionfleet.jobs.segment_files import SegmentFiles
from fusionfleet.jobs.states import JobState, NoticeStatus, segment_counts
from fusionfleet.webhooks.addresses import AddressPolicy, Resolver, WebhookRefused, check_url, resolve
from fusionfleet.webhooks.events import WebhookEvent, WebhookSubscription, payload
from fusionfleet.webhooks.outbox import read_subscription
from fusionfleet.webhooks.records import (
    DeliveryAttempt,
    DeliveryRecord,
    WebhookState,
    read_delivery,
    read_state,
    write_delivery,
    write_state,
)
from fusionfleet.webhooks.retry import WebhookRetryPolicy, decide
from fusionfleet.webhooks.secrets import TenantSecrets
from fusionfleet.webhooks.signing import signed_headers

logger = logging.getLogger(__name__)

# An event waiting for its retry that has not come back this long after its time is taken for lost.
LOST_AFTER_S = 900.0
NOTICE_FIELDS = ("reason", "error", "stage", "output", "download_url", "download_url_expires_at", "cost", "timings",
                 "frames", "duration_s", "problems", "segments_done", "segments_total")  # fmt: skip


@dataclass(frozen=True)
class WebhookConfig:
    work_bucket: str
    addresses: AddressPolicy = field(default_factory=AddressPolicy)
    retry: WebhookRetryPolicy = field(default_factory=WebhookRetryPolicy)
    # Progress that moved is sent at most this often per job; previews (a new frame link) too.
    progress_every_s: float = settings.WEBHOOK_PROGRESS_EVERY_SECONDS.default
    preview_every_s: float = 10.0
    preview_link_s: int = 3600


@dataclass(frozen=True)
class Handled:
    outcome: Literal["delivered", "retry", "deferred", "failed", "skipped", "duplicate"]
    # For `retry` and `deferred`: how long the message stays invisible before it is handled again.
    delay_s: int = 0
    reason: str = ""


class WebhookDeliverer:
    def __init__(
        self,
        storage: Storage,
        secrets: TenantSecrets,
        sender: WebhookSender,
        resolver: Resolver,
        config: WebhookConfig,
        clock: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._storage = storage
        self._secrets = secrets
        self._sender = sender
        self._resolver = resolver
        self._config = config
        self._clock = clock
        self._rand = rand

    def handle(self, event: WebhookEvent, timeout_s: float | None = None) -> Handled:
        """`timeout_s`: this attempt's bound when shorter than the policy's (what its batch has left)."""
        bucket = self._config.work_bucket
        subscription = read_subscription(self._storage, bucket, event.job_id)
        if subscription is None or not subscription.wants(event.kind):
            return Handled("skipped", reason="the job did not ask for this event")
        record = read_delivery(self._storage, bucket, event.job_id, event.event_id)
        if record is not None and record.state != "pending":
            return Handled("duplicate", reason=f"already {record.state}")
        behind = self._behind(event)
        if behind is not None:
            return behind
        if record is None:
            record_or_why = self._prepare(event, subscription)
            if isinstance(record_or_why, str):
                return Handled("skipped", reason=record_or_why)
            record = record_or_why
        return self._attempt(record, subscription, timeout_s)

    def _behind(self, event: WebhookEvent) -> Handled | None:
        """`deferred` while another event of the job waits for its retry: this one goes after it."""
        state = read_state(self._storage, self._config.work_bucket, event.job_id)
        if not state.waiting_on or state.waiting_on == event.event_id:
            return None
        now = self._clock()
        if now > state.waiting_until + LOST_AFTER_S:
            return None  # it never came back (its message died): the job's other events go on
        delay = max(1, math.ceil(state.waiting_until - now) + 1)
        return Handled("deferred", delay_s=delay, reason=f"waits behind {state.waiting_on}")

    # ------------------------------------------------------------------ the first time an event is seen
    def _prepare(self, event: WebhookEvent, subscription: WebhookSubscription) -> DeliveryRecord | str:
        """The event's delivery record with its body and sequence fixed, or why it is not sent."""
        bucket = self._config.work_bucket
        state = read_state(self._storage, bucket, event.job_id)
        now = self._clock()
        final_of_run = state.final_event if state.final_event.startswith(f"{event.job_id}.r{event.run}.") else ""
        if final_of_run:
            return f"the job's final event ({final_of_run}) was sent already"
        data, update = self._data(event, state, now)
        if data is None:
            return str(update)
        assert isinstance(update, WebhookState)
        sequence = state.next_sequence
        body = payload(event, subscription, sequence, data)
        record = DeliveryRecord(
            event_id=event.event_id, job_id=event.job_id, run=event.run, kind=event.kind, url=subscription.url or "",
            sequence=sequence, occurred_at=event.occurred_at, body=body.decode(),
        )  # fmt: skip
        # The sequence is taken before the record is written: a crash between the two leaves a gap,
        # never two events with one number.
        write_state(self._storage, bucket, event.job_id, update.model_copy(update={"next_sequence": sequence + 1}))
        write_delivery(self._storage, bucket, record)
        return record

    def _data(self, event: WebhookEvent, state: WebhookState, now: float) -> tuple[dict[str, Any] | None, Any]:
        """(the event's payload data, the job's state after it) or (None, why it is not sent)."""
        if event.final:
            notice = event.data
            data = {"state": NoticeStatus(event.kind).state, **{k: notice[k] for k in NOTICE_FIELDS if k in notice}}
            return data, state.model_copy(update={"final_event": event.event_id})
        if event.kind == "progress":
            total = int(event.data.get("segments_total", 0))
            done, failed = self._segments(event.job_id)
            counts = (done, failed, total)
            if state.progress is not None and counts[:2] == state.progress[:2]:
                return None, "progress has not moved since the last progress event"
            if now - state.progress_at < self._config.progress_every_s and done < total:
                return None, "progress was sent less than progress_every_s ago"
            segments = segment_counts(done, failed, total)
            return (
                {"state": JobState.RUNNING, "segments": segments, "fraction": round(done / total, 4) if total else 0.0},
                state.model_copy(update={"progress": counts, "progress_at": now}),
            )
        if event.kind == "preview":
            if now - state.preview_at < self._config.preview_every_s:
                return None, "a preview was sent less than preview_every_s ago"
            key = str(event.data.get("key") or layout.frame_preview_key(event.job_id))
            try:
                link = self._storage.presign_link(self._config.work_bucket, key, self._config.preview_link_s)
            except Exception as error:  # a missing frame or a signing failure: no preview this time
                return None, f"no preview link: {error}"
            data = {"state": JobState.RUNNING, "preview_url": link.url, "preview_url_expires_at": link.expires_at_iso,
                    "segment": event.data.get("segment")}  # fmt: skip
            return data, state.model_copy(update={"preview_at": now})
        return {"state": JobState.RUNNING, **event.data}, state  # started

    def _segments(self, job_id: str) -> tuple[int, int]:
        """(done, failed) segments, counted as the read model counts them (a picture's output too)."""
        files = SegmentFiles.of(self._storage.list_keys(self._config.work_bucket, layout.segments_prefix(job_id)))
        return len(files.done), len(files.failed)

    # ------------------------------------------------------------------ one attempt
    def _attempt(
        self, record: DeliveryRecord, subscription: WebhookSubscription, timeout_s: float | None = None
    ) -> Handled:
        number = len(record.attempts) + 1
        now = self._clock()
        body = record.body.encode()
        try:
            target = resolve(check_url(record.url, self._config.addresses), self._config.addresses, self._resolver)
        except WebhookRefused as refused:
            attempt = DeliveryAttempt(number=number, at=now, error=refused.reason)
            return self._end(record, attempt, "failed", refused.reason)
        secret = self._secrets.secret_for(subscription.tenant)
        headers = signed_headers(secret, record.event_id, int(now), body)
        bound = self._config.retry.timeout_s if timeout_s is None else min(timeout_s, self._config.retry.timeout_s)
        answer: Answer = self._sender.post(target, body, headers, bound)
        attempt = DeliveryAttempt(
            number=number, at=now, address=answer.address, status=answer.status, error=answer.error[:500],
            duration_s=answer.duration_s,
        )  # fmt: skip
        decision = decide(answer.status, number, self._config.retry, self._rand)
        what = f"webhook {record.event_id} attempt {number} → {answer.status or answer.error}"
        if decision.outcome == "delivered":
            logger.info("%s: delivered", what)
            return self._end(record, attempt, "delivered", "")
        if decision.outcome == "give_up":
            logger.warning("%s: %s", what, decision.reason)
            return self._end(record, attempt, "failed", decision.reason)
        logger.warning("%s: trying again in %s s", what, decision.delay_s)
        updated = record.model_copy(
            update={"attempts": (*record.attempts, attempt), "next_attempt_at": now + decision.delay_s}
        )
        write_delivery(self._storage, self._config.work_bucket, updated)
        self._wait_on(record, now + decision.delay_s)
        return Handled("retry", delay_s=decision.delay_s, reason=attempt.error or str(attempt.status))

    def _wait_on(self, record: DeliveryRecord, until: float) -> None:
        """Hold the job's later events behind this one (until: its next attempt), or let them go (0)."""
        bucket = self._config.work_bucket
        state = read_state(self._storage, bucket, record.job_id)
        if until:
            state = state.model_copy(update={"waiting_on": record.event_id, "waiting_until": until})
        elif state.waiting_on == record.event_id:
            state = state.model_copy(update={"waiting_on": "", "waiting_until": 0.0})
        else:
            return
        write_state(self._storage, bucket, record.job_id, state)

    def _end(self, record: DeliveryRecord, attempt: DeliveryAttempt, state: Literal["delivered", "failed"],
             reason: str) -> Handled:  # fmt: skip
        ended = record.model_copy(
            update={"attempts": (*record.attempts, attempt), "state": state, "reason": reason, "next_attempt_at": 0.0}
        )
        write_delivery(self._storage, self._config.work_bucket, ended)
        self._wait_on(record, 0.0)
        return Handled(state, reason=reason)
