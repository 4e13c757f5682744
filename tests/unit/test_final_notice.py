"""The notice-once protocol (fusionfleet.jobs.final_notice): one claim, one send per channel, a record
that says what the notice said."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fusionfleet import layout
from fusionfleet.jobs.final_notice import (
    CANCEL,
    STATE_MACHINE,
    WATCHDOG,
    FinalNotices,
    NoticeRecord,
    TopicChannel,
    state_machine_claim,
    told_by_itself,
    yielded,
)
from tests.support.fakes import FakeNotifier, FakeStorage
from tests.support.jobs import WORK

NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
NOTICE = {
    "status": "failed",
    "job_id": "job-a",
    "error": "SegmentFailed",
    "reason": "segment 2 failed after 3 attempts",
}


@dataclass
class Webhook:
    """A second channel, as per-job webhooks will be: it may fail once."""

    name: str = "webhook"
    failures: int = 0
    sent: list[dict[str, Any]] = field(default_factory=list)

    def send(self, notice: dict[str, Any]) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("the tenant's endpoint did not answer")
        self.sent.append(notice)


def test_only_the_first_party_to_claim_sends_and_the_record_keeps_what_it_said() -> None:
    # GIVEN a job's notice claimed by the watchdog
    storage, notifier = FakeStorage(), FakeNotifier()
    notices = FinalNotices(storage, WORK, (TopicChannel(notifier, "topic"),))
    assert notices.claim("job-a", WATCHDOG, NOW, error="JobStalled", reason="no progress")
    # WHEN a cancel and a second watchdog try to claim it
    # THEN neither may
    assert not notices.claim("job-a", CANCEL, NOW, "cancelled", retake_after_s=0)
    assert not notices.claim("job-a", WATCHDOG, NOW)
    # AND the holder's delivery publishes once, with the bounded subject, and marks the record
    notices.deliver("job-a", NOTICE, WATCHDOG, NOW)
    ((topic, subject, message),) = notifier.published
    assert (topic, subject, message) == ("topic", "FusionFleet job-a failed", NOTICE)
    record = notices.record("job-a")
    assert record is not None and record.published and record.delivered == ("topic",)
    assert (record.by, record.published_by, record.status, record.error, record.reason) == (
        WATCHDOG, WATCHDOG, "failed", "SegmentFailed", "segment 2 failed after 3 attempts",
    )  # fmt: skip


def test_a_party_takes_over_only_its_own_stale_unsent_claim() -> None:
    storage = FakeStorage()
    notices = FinalNotices(storage, WORK, ())
    assert notices.claim("job-a", CANCEL, NOW, "cancelled")
    # a young claim of its own is another run of it at work; an old one was left by a run that died
    assert not notices.claim("job-a", CANCEL, NOW + timedelta(seconds=30), retake_after_s=120)
    assert notices.claim("job-a", CANCEL, NOW + timedelta(seconds=121), retake_after_s=120)
    # another party's stale claim is not its to take
    assert not notices.claim("job-a", WATCHDOG, NOW + timedelta(hours=1), retake_after_s=120)


def test_a_second_channel_hangs_off_the_same_claim_and_a_finisher_sends_only_what_is_missing() -> None:
    # GIVEN the topic and a webhook that fails once
    storage, notifier, webhook = FakeStorage(), FakeNotifier(), Webhook(failures=1)
    notices = FinalNotices(storage, WORK, (TopicChannel(notifier, "topic"), webhook))
    assert notices.claim("job-a", WATCHDOG, NOW)
    # WHEN the delivery fails on the webhook after the topic had it
    with pytest.raises(ConnectionError):
        notices.deliver("job-a", NOTICE, WATCHDOG, NOW)
    record = notices.record("job-a")
    assert record is not None and not record.published and record.delivered == ("topic",)
    # AND a later party finishes the claim
    notices.deliver("job-a", NOTICE, WATCHDOG, NOW + timedelta(minutes=3))
    # THEN each channel had the notice exactly once
    assert len(notifier.published) == 1 and webhook.sent == [NOTICE]
    record = notices.record("job-a")
    assert record is not None and record.published and record.delivered == ("topic", "webhook")


def test_a_notice_sent_by_the_state_machine_itself_is_marked_without_a_second_send() -> None:
    storage, notifier = FakeStorage(), FakeNotifier()
    notices = FinalNotices(storage, WORK, (TopicChannel(notifier, "topic"),))
    notices.claim("job-a", WATCHDOG, NOW, error="JobStalled", reason="no progress")
    notices.mark_published("job-a", STATE_MACHINE, "it ended SUCCEEDED by itself", NOW)
    record = notices.record("job-a")
    assert record is not None and record.published and record.published_by == STATE_MACHINE
    assert record.note == "it ended SUCCEEDED by itself" and notifier.published == []


def test_the_state_machines_claim_names_the_record_and_its_outcomes_are_read_alike() -> None:
    assert state_machine_claim("job-a") == {"key": layout.notice_key("job-a"), "by": STATE_MACHINE}
    assert told_by_itself("SUCCEEDED", None) and told_by_itself("FAILED", "JobFailed")
    assert told_by_itself("FAILED", "JobFailedOnItsInput")  # its notice published too (render.asl.json)
    assert not told_by_itself("FAILED", "States.Timeout") and not told_by_itself("ABORTED", "JobFailed")
    assert yielded("FAILED", "NoticeNotClaimed") and not yielded("ABORTED", "NoticeNotClaimed")


def test_records_of_older_writers_and_unreadable_ones_still_read() -> None:
    storage = FakeStorage()
    notices = FinalNotices(storage, WORK, ())
    storage.put_json(WORK, layout.notice_key("old"), {"claimed_at": NOW.isoformat(), "published": True, "x": 1})
    storage.put_json(WORK, layout.notice_key("odd"), ["not", "a", "record"])
    assert notices.record("old") == NoticeRecord(claimed_at=NOW.isoformat(), published=True)
    odd = notices.record("odd")
    assert odd is not None and odd.age_s(NOW) == float("inf")


def test_of_two_parties_finishing_one_unsent_claim_at_once_only_one_sends() -> None:
    # GIVEN the state machine's claim left unsent (its publish failed), which two watchdog sweeps both find
    # (`make simulate N=100000`, seed 3425179129: both finished it and the job got two final notices)
    storage, notifier = FakeStorage(), FakeNotifier()
    notices = FinalNotices(storage, WORK, (TopicChannel(notifier, "topic"),))
    assert notices.claim("job-a", STATE_MACHINE, NOW, "failed", "SegmentFailed", "segment 2 failed")
    first, second = notices.record("job-a"), notices.record("job-a")
    assert first is not None and second is not None
    # WHEN both take it over THEN only the first may, and the record now names it
    assert notices.take_over("job-a", WATCHDOG, NOW + timedelta(seconds=5), first)
    assert not notices.take_over("job-a", WATCHDOG, NOW + timedelta(seconds=6), second)
    taken = notices.record("job-a")
    assert taken is not None and (taken.by, taken.claimed_at) == (WATCHDOG, (NOW + timedelta(seconds=5)).isoformat())
    # AND a claim already sent is taken by nobody
    notices.deliver("job-a", NOTICE, WATCHDOG, NOW)
    assert not notices.take_over("job-a", WATCHDOG, NOW, notices.record("job-a") or NoticeRecord())
    assert len(notifier.published) == 1
    # AND two runs of a cancel retaking its own stale claim: one of them
    assert notices.claim("job-b", CANCEL, NOW, "cancelled")
    later = NOW + timedelta(seconds=200)
    stale = notices.record("job-b")
    assert stale is not None and notices.take_over("job-b", CANCEL, later, stale)
    assert not notices.claim("job-b", CANCEL, later + timedelta(seconds=1), retake_after_s=120)
