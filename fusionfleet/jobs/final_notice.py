"""A job's one final notice: claim, send, mark — the protocol of every party that can end a job.

Whoever first creates `work/<job>/notice.json` (a conditional create, `If-None-Match: *`) sends the
job's final notice; every other party sends nothing. The parties:

- the state machine: its claim states create the record just before its own publish. Its execution
  input carries what they need (`state_machine_claim`, written by the slicer and a retry), and they
  add what the notice says (status, error, reason);
- the watchdog, for a job nobody told (`fusionfleet.services.watchdog`);
- a cancel (`fusionfleet.services.operations`).

The record says who claimed the notice, what it says (status, error, reason: what the read model
reports as the job's reason, `fusionfleet.jobs.facts`) and which channels have it. `deliver` sends
the notice on each channel the record does not list yet and marks it published once all have it,
so a party that finishes a claim another left half done sends only what is missing. Today's one
channel is the notification topic (`TopicChannel`); a second (per-job webhooks) hangs off the same
claim by joining `channels`. On the state machine's path the topic is its own publish state: a
channel beside it is sent by whoever marks that notice published.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from fusionfleet import layout
from fusionfleet.adapters.notify import Notifier, notice_subject
from fusionfleet.adapters.orchestrator import ExecutionStatus
from fusionfleet.adapters.storage import Storage, get_json, put_json
from fusionfleet.errors import ObjectMissing
from fusionfleet.jobs.states import NoticeStatus

# The parties that claim a final notice (the `by` of the record).
STATE_MACHINE = "state machine"
WATCHDOG = "watchdog"
CANCEL = "cancel"
SLICER = "slicer"  # a batch's summary, sent by the slicer when its last item ends (fusionfleet.services.batching)
TOPIC = "topic"  # the notification topic's channel name
# How the state machine ends when it published the notice itself (render.asl.json's JobFailed), and
# when that failure was the job's own input's (JobFailedOnItsInput: the operators' alarm leaves it out).
NOTIFIED_FAILURE_ERROR = "JobFailed"
NOTIFIED_INPUT_FAILURE_ERROR = "JobFailedOnItsInput"
NOTIFIED_FAILURE_ERRORS = (NOTIFIED_FAILURE_ERROR, NOTIFIED_INPUT_FAILURE_ERROR)
# How it ends when it could not create the notice record before publishing: the watchdog or a cancel
# holds it (and publishes), or the write failed (and the watchdog publishes what it had prepared).
NOTICE_NOT_CLAIMED_ERROR = "NoticeNotClaimed"
# The states whose output carries the notice the state machine was about to publish.
# (RenderFailed: executions started before a failed Map went on to the merge's gate.)
NOTICE_STATES = ("SuccessNotice", "RenderFailed", "MergeFailed")


class NoticeRecord(BaseModel):
    """`work/<job>/notice.json`. Written by the state machine, the watchdog and a cancel, which run
    different versions during a deploy: a reader ignores fields a newer writer added."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    claimed_at: str = ""  # ISO 8601
    published: bool = False  # every channel has it
    by: str = ""  # who claimed it (STATE_MACHINE, WATCHDOG, CANCEL)
    status: str = ""  # what the notice says: a NoticeStatus ("" until known)
    error: str = ""
    reason: str = ""  # the notice's reason: the job's cause, as its user was told it
    execution: str = ""  # the state machine's claim names its execution
    published_by: str = ""
    delivered: tuple[str, ...] = ()  # the channels that have it
    note: str = ""  # why a party marked a notice it did not send (e.g. it ended by itself first)

    def age_s(self, now: datetime) -> float:
        """Seconds since it was claimed; unreadable claims are infinitely old."""
        try:
            claimed = datetime.fromisoformat(self.claimed_at)
        except ValueError:
            return float("inf")
        return (now - (claimed if claimed.tzinfo else claimed.replace(tzinfo=UTC))).total_seconds()


def told_by_itself(status: str, error: str | None) -> bool:
    """An execution so ended published its own notice (a success, or a failure it named). Pure."""
    return status == ExecutionStatus.SUCCEEDED or (
        status == ExecutionStatus.FAILED and error in NOTIFIED_FAILURE_ERRORS
    )


def yielded(status: str, error: str | None) -> bool:
    """An execution so ended reached its notice, found the record another party's and sent nothing. Pure."""
    return status == ExecutionStatus.FAILED and error == NOTICE_NOT_CLAIMED_ERROR


def prepared_notice(built: dict[str, Any] | None) -> dict[str, Any] | None:
    """The final notice the state machine built before it yielded, from the output of its NOTICE_STATES
    (`Orchestrator.state_output`), or None when it built none. Pure."""
    notice = built.get("notice") if built else None
    return (
        notice
        if isinstance(notice, dict) and notice.get("status") in (NoticeStatus.SUCCEEDED, NoticeStatus.FAILED)
        else None
    )


def state_machine_claim(job_id: str, quiet: bool = False) -> dict[str, Any]:
    """What the execution input carries for the state machine's claim states (render.asl.json). `quiet`:
    a batch's item, whose notice is claimed and recorded but not published (its batch's summary names it)."""
    claim: dict[str, Any] = {"key": layout.notice_key(job_id), "by": STATE_MACHINE}
    if quiet:
        claim["quiet"] = True
    return claim


class NoticeChannel(Protocol):
    """One way a final notice reaches its user."""

    @property
    def name(self) -> str: ...

    def send(self, notice: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class TopicChannel:
    """The notification topic: subscribers filter on its message attributes (tenant, status, job)."""

    notifier: Notifier
    topic_arn: str
    name: str = TOPIC

    def send(self, notice: dict[str, Any]) -> None:
        job_id, status = str(notice.get("job_id", "")), str(notice.get("status", ""))
        self.notifier.publish(self.topic_arn, notice_subject(job_id, status), notice)


@dataclass(frozen=True)
class FinalNotices:
    """The protocol over one work bucket, with the channels a notice goes out on."""

    storage: Storage
    bucket: str
    channels: tuple[NoticeChannel, ...]

    def record(self, job_id: str) -> NoticeRecord | None:
        try:
            value = get_json(self.storage, self.bucket, layout.notice_key(job_id))
        except ObjectMissing:
            return None
        try:
            return NoticeRecord.model_validate(value)
        except ValueError:
            return NoticeRecord()  # unreadable: claimed by someone, long ago

    def claim(
        self, job_id: str, by: str, now: datetime, status: str = "", error: str = "", reason: str = "",
        retake_after_s: float | None = None,
    ) -> bool:  # fmt: skip
        """True when this party now holds the job's notice and must send it.

        `retake_after_s`: a claim of this same party, unpublished and older than this, was left by one
        of its runs that died before sending: it is taken over (a cancel's, for one).
        """
        record = NoticeRecord(
            claimed_at=now.isoformat(), by=by, status=status, error=error, reason=reason, published=False
        )
        body = record.model_dump_json().encode()
        if self.storage.create(self.bucket, layout.notice_key(job_id), body):
            return True
        if retake_after_s is None:
            return False
        held = self.record(job_id)
        if held is None or held.published or held.by != by or held.age_s(now) <= retake_after_s:
            return False
        return self.take_over(job_id, by, now, held)

    def take_over(self, job_id: str, by: str, now: datetime, seen: NoticeRecord) -> bool:
        """True when this party now holds an unpublished claim another party (or a run of its own) left, and
        must finish sending it. A conditional replace of the record it read (If-Match), so that of two
        parties finishing the same claim at once only one sends: two watchdog sweeps both finishing a claim
        whose publish had failed sent the notice twice (found by `make simulate N=100000`, seed 3425179129).
        `seen` is the claim the party decided on: one taken over since (by another sweep) is not taken again."""
        key = layout.notice_key(job_id)
        try:
            raw, etag = self.storage.get_tagged(self.bucket, key)
        except ObjectMissing:
            return False
        try:
            held = NoticeRecord.model_validate_json(raw)
        except ValueError:
            held = NoticeRecord()  # unreadable: claimed by someone, long ago
        if held.published or (held.by, held.claimed_at) != (seen.by, seen.claimed_at):
            return False
        taken = held.model_copy(update={"by": by, "claimed_at": now.isoformat()})
        return self.storage.replace(self.bucket, key, taken.model_dump_json().encode(), etag)

    def deliver(self, job_id: str, notice: dict[str, Any], published_by: str, now: datetime) -> None:
        """Send the notice on each channel that does not have it yet, then mark it published."""
        held = self.record(job_id) or NoticeRecord(claimed_at=now.isoformat(), by=published_by)
        delivered = list(held.delivered)
        for channel in self.channels:
            if channel.name in delivered:
                continue
            channel.send(notice)
            delivered.append(channel.name)
            if len(delivered) < len(self.channels):  # a later channel's failure must not resend this one
                self._write(job_id, held, notice, delivered, published=False, published_by=published_by)
        self._write(job_id, held, notice, delivered, published=True, published_by=published_by)

    def mark_published(self, job_id: str, published_by: str, note: str, now: datetime) -> None:
        """Another party sent the notice (the state machine ended by itself first): nothing more is sent."""
        held = self.record(job_id) or NoticeRecord(claimed_at=now.isoformat())
        names = tuple(channel.name for channel in self.channels)
        update = {"published": True, "published_by": published_by, "note": note, "delivered": names}
        self._put(job_id, held.model_copy(update=update))

    def _write(
        self, job_id: str, held: NoticeRecord, notice: dict[str, Any], delivered: list[str], published: bool,
        published_by: str,
    ) -> None:  # fmt: skip
        update = {
            "published": published, "published_by": published_by, "delivered": tuple(delivered),
            "status": str(notice.get("status", held.status)), "error": str(notice.get("error") or ""),
            "reason": str(notice.get("reason") or ""),
        }  # fmt: skip
        self._put(job_id, held.model_copy(update=update))

    def _put(self, job_id: str, record: NoticeRecord) -> None:
        put_json(self.storage, self.bucket, layout.notice_key(job_id), record.model_dump(mode="json"))
