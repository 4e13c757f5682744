"""Each way a message ends, carried out (gpu_worker.delivery.settle): what the message's queue and its task's token
are told for every outcome, on an in-memory queue and orchestrator."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from fusionfleet.adapters.queues import QueueMessage
from fusionfleet.messages import SegmentResult
from gpu_worker.delivery.facts import Failure
from gpu_worker.delivery.outcomes import (
    Abandon,
    DeadLetter,
    Drop,
    DropWhy,
    Fail,
    GiveBack,
    Outcome,
    Resend,
    ResendWhy,
    RetryLater,
    Succeeded,
)
from gpu_worker.delivery.queue_actions import QueueActions
from gpu_worker.delivery.settle import Settler
from gpu_worker.delivery.token_actions import TokenActions
from tests.support.fakes import FakeOrchestrator, FakeQueue
from tests.support.scripted import ScriptedHandler, Step

HIGH, QUEUE = "https://sqs.fake/render-high", "https://sqs.fake/render-normal"
RESULT = SegmentResult(index=0, key="work/s/00000.mp4", frames=50, engine_s=1.5)
FAILED = Failure("SegmentFailed", "the encoder fell over", 3)
CAUSE = "step t failed after 3 attempts: SegmentFailed: the encoder fell over"


@dataclass(frozen=True)
class Told:
    """What the queue and the token were told: the message deleted, its visibility changes, the bodies sent
    to each queue (their prior attempts), the token's calls; and what the handler noted."""

    deleted: bool = False
    visibility: tuple[int, ...] = ()
    sent: tuple[tuple[str, int], ...] = ()
    token: tuple[tuple[str, object], ...] = ()
    noted: tuple[str, ...] = ()


CASES: list[tuple[str, Outcome, Told]] = [
    ("succeeded", Succeeded(RESULT), Told(deleted=True, token=(("success", RESULT.model_dump(mode="json")),))),
    ("retry later", RetryLater(FAILED, 10), Told(visibility=(10,), noted=("failure",))),
    ("dead letter", DeadLetter(FAILED), Told(
        visibility=(0,), token=(("failure", ("SegmentFailed", CAUSE)),), noted=("failure", "lost"))),
    ("fail", Fail(FAILED), Told(
        deleted=True, token=(("failure", ("SegmentFailed", CAUSE)),), noted=("failure", "lost"))),
    ("give back", GiveBack("checkpointed"), Told(visibility=(0,))),
    ("resend blocked", Resend(ResendWhy.BLOCKED, "w is blocked", 2, 0, 0, to_top=True), Told(
        deleted=True, sent=((HIGH, 2),))),
    ("resend held", Resend(ResendWhy.HELD, "budget", 1, 0, 0), Told(deleted=True, sent=((QUEUE, 1),))),
    ("resend progress", Resend(ResendWhy.PROGRESS, "saved 40", 2, 2, 40), Told(deleted=True, sent=((QUEUE, 2),))),
    ("drop, token gone", Drop(DropWhy.TOKEN_GONE, "gone"), Told(deleted=True)),
    ("drop, superseded", Drop(DropWhy.SUPERSEDED, "copy 1 won"), Told(deleted=True)),
    ("drop, job cancelled", Drop(DropWhy.JOB_STOPPED, "cancelled"), Told(deleted=True, token=(("heartbeat", None),))),
    ("drop, job lost", Drop(DropWhy.JOB_STOPPED, "lost", cause="segment 2 failed"), Told(
        deleted=True, token=(("failure", ("JobLost", "segment 2 failed")),))),
    ("drop, backup gave up", Drop(DropWhy.BACKUP_GAVE_UP, "gave up", FAILED), Told(deleted=True, noted=("failure",))),
    ("drop, malformed", Drop(DropWhy.MALFORMED, "1 errors", cause="invalid"), Told(
        deleted=True, token=(("failure", ("MalformedTask", "invalid")),))),
    ("abandon", Abandon("receipt expired"), Told()),
]  # fmt: skip


@pytest.mark.parametrize(("outcome", "told"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_settle_tells_the_queue_and_the_token_what_the_outcome_says(outcome: Outcome, told: Told) -> None:
    # GIVEN a task's message taken from the normal queue (the high one empty)
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(), ScriptedHandler()
    queue.create(HIGH)
    queue.create(QUEUE, max_receive_count=3)
    message_id = queue.send(QUEUE, Step(task_token="t", outcome="ok").wire_json())
    (message,) = queue.receive(QUEUE, wait_s=0, visibility_s=60)
    task = handler.parse(message.body)
    settler = settled_by(queue, orchestrator, handler)
    # WHEN the outcome is settled
    assert settler.settle(message, task, handler.describe(task), outcome)
    # THEN the queue and the token are told what it says, and nothing else
    assert (message_id in queue.deleted) == told.deleted
    assert tuple(seconds for _, seconds in queue.visibility_changes) == told.visibility
    assert sent(queue, message) == told.sent
    assert tuple((kind, detail) for kind, _, detail in orchestrator.calls) == told.token
    noted = ("failure",) * len(handler.recorded) + ("lost",) * len(handler.lost)
    assert noted == told.noted


def test_the_counts_say_what_the_worker_completed_and_gave_up_on() -> None:
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(), ScriptedHandler()
    queue.create(QUEUE)
    settler = settled_by(queue, orchestrator, handler)
    for outcome in (Succeeded(RESULT), RetryLater(FAILED, 2), Fail(FAILED), Drop(DropWhy.BACKUP_GAVE_UP, "", FAILED)):
        queue.send(QUEUE, Step(task_token="t", outcome="ok").wire_json())
        (message,) = queue.receive(QUEUE, wait_s=0, visibility_s=60)
        task = handler.parse(message.body)
        settler.settle(message, task, handler.describe(task), outcome)
    assert (settler.completed, settler.failed) == (1, 2)


def test_a_renewal_that_cannot_be_sent_is_not_settled_unless_it_may_be_given_back() -> None:
    # GIVEN a queue that refuses every send
    queue, orchestrator, handler = Refusing(), FakeOrchestrator(), ScriptedHandler()
    queue.create(QUEUE, max_receive_count=3)
    queue.send(QUEUE, Step(task_token="t", outcome="ok").wire_json(), force=True)
    (message,) = queue.receive(QUEUE, wait_s=0, visibility_s=60)
    task, settler = handler.parse(message.body), settled_by(queue, orchestrator, handler)
    names = handler.describe(task)
    # WHEN a renewal at take fails THEN it is not settled: the task renders under this delivery
    assert not settler.settle(message, task, names, Resend(ResendWhy.PROGRESS, "", 2, 2, 40, or_give_back=False))
    assert queue.visibility_changes == [] and queue.deleted == []
    # AND one at a warm stop is given back instead
    assert settler.settle(message, task, names, Resend(ResendWhy.PROGRESS, "", 2, 2, 40))
    assert [seconds for _, seconds in queue.visibility_changes] == [0] and queue.deleted == []


class Refusing(FakeQueue):
    def send(self, queue_url: str, body: str, force: bool = False) -> str:
        if not force:
            raise OSError("SQS is down")
        return super().send(queue_url, body)


def settled_by(queue: FakeQueue, orchestrator: FakeOrchestrator, handler: ScriptedHandler) -> Settler[Step]:
    tokens = TokenActions(orchestrator, handler, take_recheck_s=0.01, token_grace_s=0.0)
    stopped = threading.Event()
    stopped.set()  # no pause after a resend
    return Settler(QueueActions(queue, [HIGH, QUEUE]), tokens, orchestrator, handler, stopped, idle_wait_s=0)


def sent(queue: FakeQueue, taken: QueueMessage) -> tuple[tuple[str, int], ...]:
    """The new messages on each queue: (queue, the prior attempts they carry)."""
    found = []
    for url in (HIGH, QUEUE):
        for message in queue.receive(url, wait_s=0, visibility_s=0, max_messages=10):
            if message.message_id != taken.message_id:
                found.append((url, Step.model_validate_json(message.body).prior_attempts))
    return tuple(found)
