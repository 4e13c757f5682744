"""The worker loop's ways out of a task other than success, on an in-memory queue and orchestrator."""

from __future__ import annotations

import time

from gpu_worker.attempt import Attempt
from gpu_worker.delivery.keeper import KeepPolicy
from gpu_worker.delivery.loop import Worker
from gpu_worker.delivery.retry import RetryPolicy
from gpu_worker.delivery.token_actions import LOCALSTACK_TOKEN_GRACE_S, token_grace_s
from gpu_worker.lifecycle.stopping import StopSignal
from tests.support.fakes import FakeOrchestrator, FakeQueue
from tests.support.scripted import QUEUE, ScriptedHandler, Step

FELL_OVER = "step t failed after 3 attempts: SegmentFailed: the encoder fell over"
NO_FACE = "step t failed after 1 attempt: InputRejected: no face in source[0]"


def worker(
    handler: ScriptedHandler, queue: FakeQueue, orchestrator: FakeOrchestrator, visibility_s: int = 60
) -> Worker[Step]:
    return Worker(
        "w", [QUEUE], handler, queue, orchestrator, RetryPolicy(max_attempts=3, backoff_s=(2, 10, 60)),
        KeepPolicy(visibility_s=visibility_s), StopSignal(), idle_wait_s=0,
    )  # fmt: skip


def take_one(subject: Worker[Step]) -> bool:
    message = subject.take()
    if message is None:
        return False
    subject.execute(message)
    return True


def test_a_failed_attempt_is_retried_after_the_policy_delay_and_the_last_one_fails_the_token() -> None:
    # GIVEN a task that fails on every attempt, on a queue that allows three receives
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(), ScriptedHandler()
    queue.create(QUEUE, max_receive_count=3)
    message_id = queue.send(QUEUE, Step(task_token="t", outcome="fail").model_dump_json())
    subject = worker(handler, queue, orchestrator)
    # WHEN the first attempt fails
    assert take_one(subject)
    # THEN the message is hidden for the first back-off, the failure is recorded, the token untouched
    assert queue.visibility_changes == [(message_id, 2)]
    assert handler.recorded == [("t", "SegmentFailed", "the encoder fell over", 1)]
    assert orchestrator.reports() == []
    assert not take_one(subject)
    # WHEN the back-off has passed, the second attempt fails too
    queue.clock.advance(2)
    assert take_one(subject)
    assert queue.visibility_changes[-1] == (message_id, 10)
    # WHEN the third and last attempt fails
    queue.clock.advance(10)
    assert take_one(subject)
    # THEN only now is the token failed, with the reason, and the message made visible for its DLQ
    assert orchestrator.reports() == [("failure", "t", ("SegmentFailed", FELL_OVER))]
    assert queue.visibility_changes[-1] == (message_id, 0)
    assert [attempt.number for attempt in handler.attempts] == [1, 2, 3]
    assert subject.failed == 1 and queue.deleted == []
    # AND the job is marked failed once, with the same cause, so its other segments are dropped
    assert handler.lost == [("t", FELL_OVER, 3)]
    # AND the queue's redrive takes it to the dead letters instead of a fourth attempt
    assert not take_one(subject)
    assert len(queue.dead_letters(QUEUE)) == 1


def test_bad_input_fails_the_token_at_once_and_drops_the_message() -> None:
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(), ScriptedHandler()
    queue.create(QUEUE, max_receive_count=3)
    message_id = queue.send(QUEUE, Step(task_token="t", outcome="reject").model_dump_json())
    # WHEN its first attempt is rejected
    assert take_one(worker(handler, queue, orchestrator))
    # THEN the token fails on the first attempt and the message is deleted, not retried
    assert orchestrator.reports() == [("failure", "t", ("InputRejected", NO_FACE))]
    assert queue.deleted == [message_id] and queue.visibility_changes == []


def test_the_last_failure_with_a_gone_token_still_sends_the_message_to_its_dlq() -> None:
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(gone_after={"t": 1}), ScriptedHandler()
    queue.create(QUEUE, max_receive_count=1)
    message_id = queue.send(QUEUE, Step(task_token="t", outcome="fail").model_dump_json())
    subject = Worker(
        "w", [QUEUE], handler, queue, orchestrator, RetryPolicy(max_attempts=1), KeepPolicy(60), StopSignal(),
        idle_wait_s=0,
    )  # fmt: skip
    assert take_one(subject)
    assert [call[0] for call in orchestrator.reports()] == ["failure"]
    assert queue.visibility_changes == [(message_id, 0)] and queue.deleted == []


def test_a_result_for_a_gone_token_is_dropped_with_its_message() -> None:
    # GIVEN a task whose token timed out while it rendered
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(gone_after={"t": 1}), ScriptedHandler()
    queue.create(QUEUE)
    message_id = queue.send(QUEUE, Step(task_token="t", outcome="ok").model_dump_json())
    subject = worker(handler, queue, orchestrator)
    # WHEN it succeeds
    assert take_one(subject)
    # THEN the result was offered once (as JSON), never retried, and the message deleted
    assert orchestrator.reports() == [
        ("success", "t", {"index": 0, "key": "work/s/00000.mp4", "frames": 50, "engine_s": 1.5, "copy_number": 0})
    ]
    assert queue.deleted == [message_id] and subject.completed == 0


def test_the_attempt_carries_the_time_the_task_waited_in_the_queue() -> None:
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(), ScriptedHandler()
    queue.create(QUEUE)
    queue.send(QUEUE, Step(task_token="t", outcome="ok").model_dump_json())
    queue.clock.advance(42.5)
    assert take_one(worker(handler, queue, orchestrator))
    assert handler.attempts == [Attempt(number=1, sent_at=queue.clock() - 42.5, received_at=queue.clock())]
    assert handler.attempts[0].queued_s == 42.5


def test_a_task_whose_token_is_gone_is_abandoned_and_deleted() -> None:
    # GIVEN a long task whose token is closed while it runs (the heartbeat finds out)
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(gone_after={"t": 1}), ScriptedHandler()
    queue.create(QUEUE)
    message_id = queue.send(QUEUE, Step(task_token="t", outcome="wait").model_dump_json())
    # WHEN the keeper's first beat fails
    assert take_one(worker(handler, queue, orchestrator, visibility_s=1))
    # THEN the work was cancelled, nothing reported, and the message deleted for good
    assert orchestrator.reports() == [] and [call[0] for call in orchestrator.calls] == ["heartbeat", "heartbeat"]
    assert queue.deleted == [message_id] and len(handler.attempts) == 1
    assert handler.recorded == []


def test_a_task_whose_token_is_already_gone_when_taken_is_dropped_unrendered() -> None:
    # GIVEN a queued task of a job whose execution was stopped (cancelled)
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(gone={"t"}), ScriptedHandler()
    queue.create(QUEUE)
    message_id = queue.send(QUEUE, Step(task_token="t", outcome="ok").model_dump_json())
    # (sent a minute before it is taken: past the grace a young message's token gets)
    queue.clock.advance(60)
    # WHEN a worker takes it
    assert take_one(worker(handler, queue, orchestrator))
    # THEN the heartbeat it sends at once (and once more a moment later) finds the token gone: nothing
    # rendered, the message deleted
    assert handler.attempts == [] and orchestrator.reports() == []
    assert [call[0] for call in orchestrator.calls] == ["heartbeat", "heartbeat"] and queue.deleted == [message_id]


def test_a_token_not_yet_registered_when_taken_is_checked_again_before_it_counts_as_gone() -> None:
    # GIVEN a token the orchestrator does not know for its first heartbeat (LocalStack registers it late)
    queue, handler = FakeQueue(), ScriptedHandler()
    orchestrator = FakeOrchestrator(gone={"t"})
    queue.create(QUEUE)
    queue.send(QUEUE, Step(task_token="t", outcome="ok").model_dump_json())
    subject = worker(handler, queue, orchestrator)
    original = orchestrator.heartbeat

    def late(token: str) -> None:
        try:
            original(token)
        finally:
            orchestrator.gone.discard(token)

    orchestrator.heartbeat = late  # type: ignore[method-assign]
    # WHEN a worker takes it
    assert take_one(subject)
    # THEN the second heartbeat finds it, and the segment is rendered and reported
    assert len(handler.attempts) == 1 and [call[0] for call in orchestrator.reports()] == ["success"]


def test_a_young_message_whose_token_is_registered_late_is_asked_again_until_it_is_known() -> None:
    # GIVEN a message taken as soon as it was sent, whose token the orchestrator learns only at the
    # fourth heartbeat (LocalStack under load registers tokens seconds after sending their message)
    queue, handler = FakeQueue(), ScriptedHandler()
    orchestrator = FakeOrchestrator(gone={"t"})
    queue.create(QUEUE)
    queue.send(QUEUE, Step(task_token="t", outcome="ok").model_dump_json())
    subject = Worker(
        "w", [QUEUE], handler, queue, orchestrator, RetryPolicy(max_attempts=3, backoff_s=(2, 10, 60)),
        KeepPolicy(visibility_s=60), StopSignal(), idle_wait_s=0, take_recheck_s=0.01, token_grace_s=5.0,
    )  # fmt: skip
    original = orchestrator.heartbeat
    asked = []

    def late(token: str) -> None:
        asked.append(token)
        if len(asked) == 4:
            orchestrator.gone.discard(token)
        original(token)

    orchestrator.heartbeat = late  # type: ignore[method-assign]
    # WHEN a worker takes it
    assert take_one(subject)
    # THEN it is rendered and reported, not dropped after the second answer
    assert len(handler.attempts) == 1 and [call[0] for call in orchestrator.reports()] == ["success"]


def test_a_young_message_whose_token_stays_gone_is_dropped_when_its_grace_ends() -> None:
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(gone={"t"}), ScriptedHandler()
    queue.create(QUEUE)
    message_id = queue.send(QUEUE, Step(task_token="t", outcome="ok").model_dump_json())
    subject = Worker(
        "w", [QUEUE], handler, queue, orchestrator, RetryPolicy(max_attempts=3, backoff_s=(2, 10, 60)),
        KeepPolicy(visibility_s=60), StopSignal(), idle_wait_s=0, take_recheck_s=0.01, token_grace_s=0.3,
    )  # fmt: skip
    assert take_one(subject)
    heartbeats = [call for call in orchestrator.calls if call[0] == "heartbeat"]
    assert handler.attempts == [] and queue.deleted == [message_id] and len(heartbeats) >= 3


def test_on_aws_a_gone_token_is_gone_at_once_and_only_locally_is_it_given_a_grace() -> None:
    # LocalStack registers tokens late (the grace); AWS registers a token with its message (none).
    assert token_grace_s(None) == 0.0 and token_grace_s("http://127.0.0.1:4566") == LOCALSTACK_TOKEN_GRACE_S
    # GIVEN a young message whose token is gone, on AWS
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(gone={"t"}), ScriptedHandler()
    queue.create(QUEUE)
    message_id = queue.send(QUEUE, Step(task_token="t", outcome="ok").model_dump_json())
    subject = Worker(
        "w", [QUEUE], handler, queue, orchestrator, RetryPolicy(max_attempts=3, backoff_s=(2, 10, 60)),
        KeepPolicy(visibility_s=60), StopSignal(), idle_wait_s=0, take_recheck_s=0.01,
        token_grace_s=token_grace_s(None),
    )  # fmt: skip
    # WHEN a worker takes it THEN it is dropped after the token is asked twice, a pause apart
    assert take_one(subject)
    heartbeats = [call for call in orchestrator.calls if call[0] == "heartbeat"]
    assert handler.attempts == [] and queue.deleted == [message_id] and len(heartbeats) == 2


def test_a_task_of_a_cancelled_job_is_dropped_unrendered_even_with_a_live_token() -> None:
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(), ScriptedHandler()
    queue.create(QUEUE)
    message_id = queue.send(QUEUE, Step(task_token="t", outcome="cancelled").model_dump_json())
    assert take_one(worker(handler, queue, orchestrator))
    # (its token gets a heartbeat at take and one more as it is dropped: a stopping execution needs them)
    assert handler.attempts == [] and orchestrator.reports() == [] and queue.deleted == [message_id]
    assert [call[0] for call in orchestrator.calls] == ["heartbeat", "heartbeat"]


def test_a_task_redelivered_elsewhere_is_abandoned_and_left_to_the_other_worker() -> None:
    # GIVEN a long task whose message another worker receives meanwhile (its visibility ran out)
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    queue.create(QUEUE)

    def redeliver() -> None:
        queue.clock.advance(5)
        assert len(queue.receive(QUEUE, wait_s=0, visibility_s=60)) == 1

    handler = ScriptedHandler(during=redeliver)
    queue.send(QUEUE, Step(task_token="t", outcome="wait").model_dump_json())
    # WHEN the keeper's first visibility extension finds its receipt stale
    assert take_one(worker(handler, queue, orchestrator, visibility_s=1))
    # THEN the work was cancelled and the message left alone: the other worker holds it
    assert orchestrator.reports() == [] and queue.deleted == []
    assert queue.depth(QUEUE).in_flight == 1


def test_a_young_message_of_a_cancelled_job_with_a_gone_token_is_dropped_without_waiting_out_the_grace() -> None:
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(gone={"t"}), ScriptedHandler()
    queue.create(QUEUE)
    message_id = queue.send(QUEUE, Step(task_token="t", outcome="cancelled").model_dump_json())
    started = time.monotonic()
    assert take_one(worker(handler, queue, orchestrator))
    assert handler.attempts == [] and queue.deleted == [message_id]
    assert time.monotonic() - started < 5  # the default grace is 30 s


def test_a_copy_whose_other_copy_committed_stops_and_drops_its_message() -> None:
    # GIVEN a straggler rendering while its backup copy commits the segment
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(), ScriptedHandler()
    queue.create(QUEUE)
    message_id = queue.send(QUEUE, Step(task_token="t", outcome="superseded").model_dump_json())
    # WHEN the keeper's winner check sees the other copy's commit
    assert take_one(worker(handler, queue, orchestrator))
    # THEN the work stops, nothing is reported for it and its message is gone
    assert orchestrator.reports() == [] and queue.deleted == [message_id]


def test_a_backup_copy_that_fails_for_good_never_fails_the_token() -> None:
    # GIVEN a backup copy that fails on every attempt
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(), ScriptedHandler()
    queue.create(QUEUE, max_receive_count=3)
    message_id = queue.send(QUEUE, Step(task_token="t", outcome="fail", copy_number=1).model_dump_json())
    subject = worker(handler, queue, orchestrator)
    # WHEN its last attempt fails
    for delay in (0, 2, 10):
        queue.clock.advance(delay)
        assert take_one(subject)
    # THEN the original keeps the token: no SendTaskFailure, and the copy's message is gone, not dead-lettered
    assert orchestrator.reports() == [] and queue.deleted == [message_id]


def test_a_blocklisted_worker_hands_a_task_back_as_a_new_message_without_spending_an_attempt() -> None:
    # GIVEN a task whose second delivery reaches a worker blocklisted for its job
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(), ScriptedHandler()
    queue.create(QUEUE, max_receive_count=3)
    first = queue.send(QUEUE, Step(task_token="t", outcome="blocked-once").model_dump_json())
    subject = worker(handler, queue, orchestrator)
    message = queue.receive(QUEUE, wait_s=0, visibility_s=0)[0]  # (an earlier delivery, lost)
    queue.clock.advance(1)
    # WHEN the worker takes it
    assert take_one(subject)
    # THEN the old message is gone and a new one waits, carrying the one real attempt made so far
    assert queue.deleted == [first] and message.receive_count == 1
    assert queue.depth(QUEUE).visible == 1 and handler.recorded == []
    # AND the next worker's failure is attempt 2 of 3: the hand-back cost nothing
    queue.clock.advance(1)
    assert take_one(subject)
    assert [attempt.number for attempt in handler.attempts] == [2, 2]
    assert handler.recorded == [("t", "SegmentFailed", "the encoder fell over", 2)]
    assert orchestrator.reports() == []


def test_a_blocklisted_workers_hand_back_of_a_retry_keeps_its_place_and_a_fresh_task_stays_in_its_queue() -> None:
    # GIVEN a worker on a high and a normal queue, and behind a backlog in the normal queue a retried
    # task (its first delivery lost) and a fresh one, both of a job the worker is blocklisted for
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(), ScriptedHandler()
    high = "https://sqs.fake/render-high"
    queue.create(high, max_receive_count=3)
    queue.create(QUEUE, max_receive_count=3)
    retried = queue.send(QUEUE, Step(task_token="retried", outcome="blocked").model_dump_json())
    queue.receive(QUEUE, wait_s=0, visibility_s=0)  # (an earlier delivery, lost)
    queue.send(QUEUE, Step(task_token="fresh", outcome="blocked").model_dump_json())
    for n in range(3):
        queue.send(QUEUE, Step(task_token=f"backlog-{n}", outcome="ok").model_dump_json())
    subject = Worker(
        "w", [high, QUEUE], handler, queue, orchestrator, RetryPolicy(max_attempts=3),
        KeepPolicy(visibility_s=60), StopSignal(), idle_wait_s=0,
    )  # fmt: skip
    queue.clock.advance(1)
    # WHEN it takes the retry
    assert take_one(subject)
    # THEN the retry went to the top queue, ahead of the backlog, and still carries its one attempt
    (top,) = queue.receive(high, wait_s=0, visibility_s=60)  # (another worker takes it)
    assert Step.model_validate_json(top.body).task_token == "retried"
    assert Step.model_validate_json(top.body).prior_attempts == 1 and retried in queue.deleted
    # AND the fresh task it takes next went back to its own queue's tail, behind the backlog
    assert take_one(subject)
    behind = queue.receive(QUEUE, wait_s=0, visibility_s=60, max_messages=10)
    assert [Step.model_validate_json(m.body).task_token for m in behind] == [
        *(f"backlog-{n}" for n in range(3)),
        "fresh",
    ]


def test_a_handed_back_task_that_fails_its_last_attempt_is_dropped_not_delivered_again() -> None:
    # GIVEN a task handed back after two attempts (a new message, received once so far)
    queue, orchestrator, handler = FakeQueue(), FakeOrchestrator(), ScriptedHandler()
    queue.create(QUEUE, max_receive_count=3)
    message_id = queue.send(QUEUE, Step(task_token="t", outcome="fail", prior_attempts=2).model_dump_json())
    subject = worker(handler, queue, orchestrator)
    # WHEN its third attempt fails
    assert take_one(subject)
    # THEN the token fails with that attempt's reason and the message is deleted: the queue's redrive
    # counts only this message's one receive, so released it would be rendered a fourth time
    assert orchestrator.reports() == [("failure", "t", ("SegmentFailed", FELL_OVER))]
    assert queue.deleted == [message_id]
    queue.clock.advance(60)
    assert not take_one(subject) and handler.recorded == [("t", "SegmentFailed", "the encoder fell over", 3)]
