"""Progress-aware attempts: deliveries that saved chunks do not walk a segment into the dead letters."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import pytest
from pydantic import BaseModel

from fusionfleet import layout
from fusionfleet.adapters.queues import QueueMessage
from fusionfleet.messages import RenderTask, SegmentAttempt, SegmentResult
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.facts import Names, Progress, Standing
from gpu_worker.delivery.keeper import KeepPolicy
from gpu_worker.delivery.loop import Worker
from gpu_worker.delivery.retry import ProgressPolicy, RetryPolicy, worth_resending
from gpu_worker.delivery.tasks import RenderHandler, TaskHandler
from gpu_worker.errors import GivenBack
from gpu_worker.lifecycle.stopping import ColdStop, StopSignal
from gpu_worker.rendering.checkpoints import parse_chunks, saved_frames
from tests.support.fakes import FakeOrchestrator, FakeQueue, FakeStorage
from tests.support.jobs import WORK, halves, job_context
from tests.support.tasks import StubTask

QUEUE = "https://sqs.fake/render-normal"
POLICY = ProgressPolicy(max_deliveries=6)


def test_only_the_last_delivery_with_new_progress_under_the_cap_is_renewed() -> None:
    # GIVEN a queue that dead-letters after 3 receives
    # THEN an earlier delivery is never renewed: a kill then costs nothing final
    assert not worth_resending(POLICY, receive_count=2, max_receive_count=3, attempt=2, saved=40, sent_with=0)
    # AND the last delivery is renewed when chunks were saved since the message was sent
    assert worth_resending(POLICY, receive_count=3, max_receive_count=3, attempt=3, saved=40, sent_with=0)
    # AND not when nothing new was saved (a fruitless kill or a crash at the same frame)
    assert not worth_resending(POLICY, receive_count=3, max_receive_count=3, attempt=3, saved=40, sent_with=40)
    # AND not at the hard cap on deliveries, so a poison segment that advances a little still ends
    assert not worth_resending(POLICY, receive_count=3, max_receive_count=3, attempt=6, saved=80, sent_with=40)
    # AND deliveries whose workers were killed or stopped buy one more round without progress, no more:
    # a segment that takes its worker down every time still ends
    assert worth_resending(POLICY, receive_count=3, max_receive_count=3, attempt=3, saved=0, sent_with=0, died=2)
    assert not worth_resending(POLICY, receive_count=3, max_receive_count=3, attempt=5, saved=0, sent_with=0, died=2)
    assert not worth_resending(POLICY, receive_count=3, max_receive_count=3, attempt=3, saved=0, sent_with=0, died=0)
    # AND never on a queue without a redrive limit
    assert not worth_resending(POLICY, receive_count=9, max_receive_count=None, attempt=3, saved=40, sent_with=0)


def test_saved_frames_counts_only_an_unbroken_run_of_chunks_from_the_segment_start() -> None:
    keys = [
        f"work/j/checkpoints/00001/{first:07d}-{end:07d}.mp4" for first, end in ((100, 120), (120, 140), (160, 180))
    ]
    assert saved_frames(parse_chunks(keys), 100) == 40  # the gap at 140 ends the run
    assert saved_frames(parse_chunks(keys), 90) == 0
    assert saved_frames([], 100) == 0


class Segment(BaseModel):
    index: int = 0


class Slice(StubTask):
    segment: Segment = Segment()

    @property
    def saves_progress(self) -> bool:
        return True


class CheckpointingHandler(TaskHandler[Slice]):
    """Renders a slice; `saved` stands for the frames its killed attempts checkpointed so far."""

    role = "render"

    def __init__(self) -> None:
        self.saved = 0
        self.attempts: list[tuple[int, int]] = []  # (attempt number, frames it started from)
        self.failed: set[int] = set()  # attempt numbers whose record says failed (the rest were killed)

    def parse(self, body: str) -> Slice:
        return Slice.model_validate_json(body)

    def describe(self, task: Slice) -> Names:
        return Names(f"slice {task.task_token}")

    def start(self, task: Slice, cancel: threading.Event, attempt: Attempt) -> Callable[[], SegmentResult]:
        self.attempts.append((attempt.number, self.saved))
        result = SegmentResult(index=0, key="work/s/00000.mp4", frames=50, engine_s=1.0)
        return lambda: result

    def standing(self, task: Slice, progress_of: range | None = None) -> Standing:
        if progress_of is None:
            return Standing()
        return Standing(progress=Progress(self.saved, sum(number in self.failed for number in progress_of)))


def _kill_delivery(queue: FakeQueue, handler: CheckpointingHandler, frames: int) -> None:
    """A worker takes the message, checkpoints `frames` more frames and is killed (-9): it never answers."""
    assert queue.receive(QUEUE, wait_s=0, visibility_s=60)
    handler.saved += frames
    queue.clock.advance(61)


def _worker(handler: CheckpointingHandler, queue: FakeQueue, orchestrator: FakeOrchestrator) -> Worker[Slice]:
    return Worker(
        "w", [QUEUE], handler, queue, orchestrator, RetryPolicy(max_attempts=3, backoff_s=(0,)),
        KeepPolicy(visibility_s=60), StopSignal(), idle_wait_s=0, progress=POLICY,
    )  # fmt: skip


def _one_segment(handler: CheckpointingHandler) -> tuple[FakeQueue, FakeOrchestrator, Worker[Slice]]:
    """A segment's message on a queue that dead-letters after 3 receives, and a worker for it."""
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    queue.create(QUEUE, max_receive_count=3)
    queue.send(QUEUE, Slice(task_token="t").wire_json())
    return queue, orchestrator, _worker(handler, queue, orchestrator)


def _last_delivery(subject: Worker[Slice]) -> QueueMessage:
    """The segment's message taken at its last delivery (the queue dead-letters after 3 receives)."""
    message = subject.take()
    assert message is not None and message.receive_count == 3
    return message


def _sent_again(queue: FakeQueue, subject: Worker[Slice], message: QueueMessage) -> Slice:
    """`message` was deleted and its task went back as a new message (its first delivery): that task."""
    assert queue.deleted[-1] == message.message_id
    renewed = subject.take()
    assert renewed is not None and renewed.receive_count == 1
    return Slice.model_validate_json(renewed.body)


def _last_delivery_after_two_kills(
    handler: CheckpointingHandler, saved: int
) -> tuple[FakeQueue, FakeOrchestrator, Worker[Slice], Slice]:
    """One segment whose first two deliveries were killed after saving `saved` frames each, its last delivery
    executed: that delivery renders nothing and its task goes back as a new message (returned, with the rest)."""
    queue, orchestrator, subject = _one_segment(handler)
    _kill_delivery(queue, handler, saved)
    _kill_delivery(queue, handler, saved)
    message = _last_delivery(subject)
    subject.execute(message)
    assert handler.attempts == [] and queue.deleted == [message.message_id]
    return queue, orchestrator, subject, _sent_again(queue, subject, message)


def test_a_segment_killed_repeatedly_while_advancing_completes_instead_of_dead_lettering() -> None:
    # GIVEN a segment on a queue that dead-letters after 3 receives, whose workers are killed
    handler = CheckpointingHandler()
    # WHEN its first two deliveries are killed after saving chunks each time, and a worker takes its last
    queue, orchestrator, subject, task = _last_delivery_after_two_kills(handler, 20)
    # THEN it is not rendered under that delivery: it goes back as a new message with its progress
    assert (task.prior_attempts, task.forgiven_attempts, task.progress_frames) == (2, 2, 40)
    handler.saved += 10  # (that take was killed too, after saving more)
    queue.clock.advance(61)
    # WHEN the new message's second delivery is killed as well, after saving more
    _kill_delivery(queue, handler, 10)
    # THEN its last delivery is renewed once more (60 frames saved, 40 when sent)
    again = _last_delivery(subject)
    subject.execute(again)
    assert handler.attempts == []
    # WHEN the next worker lives
    final = subject.take()
    assert final is not None and final.receive_count == 1
    subject.execute(final)
    # THEN the segment completes (its token succeeds) and nothing reached the dead letters
    assert [report[0] for report in orchestrator.reports()] == ["success"]
    assert queue.dead_letters(QUEUE) == []
    assert handler.attempts == [(5, 60)]  # after four kills: the fifth delivery, from 60 saved frames


def test_a_segment_whose_workers_were_killed_before_its_first_chunk_is_renewed_at_its_last_delivery() -> None:
    # GIVEN a segment on a queue that dead-letters after 3 receives, whose first two workers were
    # killed before saving anything (the soak at efea6c8 lost a 3-minute job to three such kills)
    handler = CheckpointingHandler()
    # WHEN a worker takes its last delivery
    queue, _orchestrator, _subject, task = _last_delivery_after_two_kills(handler, 0)
    # THEN it goes back as a new message with both killed deliveries forgiven, its progress unchanged
    assert (task.prior_attempts, task.forgiven_attempts, task.progress_frames) == (2, 2, 0)
    assert queue.dead_letters(QUEUE) == []


def test_a_segment_that_failed_on_its_own_is_not_renewed_and_meets_its_retry_limit() -> None:
    # GIVEN a segment whose first two attempts failed (recorded), not killed, and saved nothing
    handler = CheckpointingHandler()
    queue, _orchestrator, subject = _one_segment(handler)
    _kill_delivery(queue, handler, 0)
    _kill_delivery(queue, handler, 0)
    handler.failed = {1, 2}
    # WHEN a worker takes its last delivery
    subject.execute(_last_delivery(subject))
    # THEN it renders under it: one killed or stopped delivery is what a renewal needs
    assert handler.attempts == [(3, 0)]


def test_one_killed_delivery_among_failures_is_the_only_one_forgiven() -> None:
    # GIVEN a segment whose first attempt failed and whose second worker was killed
    handler = CheckpointingHandler()
    queue, _orchestrator, subject = _one_segment(handler)
    _kill_delivery(queue, handler, 0)
    _kill_delivery(queue, handler, 0)
    handler.failed = {1}
    message = subject.take()
    assert message is not None
    subject.execute(message)
    # THEN the new message forgives the kill only: the failure still counts towards the retry limit
    renewed = subject.take()
    assert renewed is not None
    task = Slice.model_validate_json(renewed.body)
    assert (task.prior_attempts, task.forgiven_attempts) == (2, 1)


def test_a_segment_whose_kills_save_nothing_still_dead_letters_when_its_last_delivery_is_killed_too() -> None:
    # GIVEN a segment whose workers are killed before any chunk is saved, its last delivery included
    handler = CheckpointingHandler()
    queue, _orchestrator, subject = _one_segment(handler)
    _kill_delivery(queue, handler, 0)
    _kill_delivery(queue, handler, 0)
    _kill_delivery(queue, handler, 0)
    # WHEN a worker next looks, THEN the queue's redrive has taken it: nothing was renewed
    assert subject.take() is None
    assert len(queue.dead_letters(QUEUE)) == 1


def test_renewals_stop_at_the_cap_on_total_deliveries() -> None:
    # GIVEN a segment that saves a few frames on every killed delivery (a slow poison)
    handler = CheckpointingHandler()
    queue, _orchestrator, subject = _one_segment(handler)
    renewals = 0
    # WHEN each delivery saves 5 frames and is killed, except that a worker looks at each last one
    for _ in range(40):
        message = subject.take()
        if message is None:
            break
        handler.saved += 5
        if message.receive_count < 3:
            queue.clock.advance(61)  # killed
            continue
        subject.execute(message)
        if handler.attempts:
            break  # rendered under its last delivery: not renewed
        renewals += 1
        queue.clock.advance(61)
    # THEN it was renewed at deliveries 3 and 5 only; delivery 7 is past the cap (6) and renders
    # under its last SQS receive, so a kill now dead-letters it: a slow poison still ends
    assert renewals == 2
    assert handler.attempts == [(7, 45)]


class StoppedHandler(CheckpointingHandler):
    """Checkpoints `frames` and is stopped warm, its render ending in `stop`: ColdStop (SIGTERM to the worker: the
    engine stops after its current chunk), or GivenBack (SIGTERM drained the engine: it saved its chunk,
    gpu_worker.hosting.engine_host, and the worker carries on to its stop)."""

    def __init__(self, frames: int, stop: type[ColdStop | GivenBack]) -> None:
        super().__init__()
        self.frames = frames
        self.stop = stop

    def start(self, task: Slice, cancel: threading.Event, attempt: Attempt) -> Callable[[], SegmentResult]:
        self.attempts.append((attempt.number, self.saved))
        self.saved += self.frames
        raise self.stop(f"slice {task.task_token}: checkpointed before frame {self.saved}")


def _last_delivery_after_two_failures(handler: CheckpointingHandler) -> tuple[FakeQueue, Worker[Slice], QueueMessage]:
    """One segment on a queue that dead-letters after 3 receives, whose first two attempts failed before saving
    anything (failures, so taking its last delivery does not renew it): the queue, the worker, that delivery."""
    queue, _orchestrator, subject = _one_segment(handler)
    _kill_delivery(queue, handler, 0)
    _kill_delivery(queue, handler, 0)
    handler.failed = {1, 2}
    return queue, subject, _last_delivery(subject)


def test_a_warm_stop_on_the_last_delivery_after_checkpointing_sends_the_segment_again() -> None:
    # GIVEN a segment whose first two attempts failed, its last delivery taken
    handler = StoppedHandler(frames=30, stop=ColdStop)
    queue, subject, message = _last_delivery_after_two_failures(handler)
    # WHEN it renders, checkpoints 30 frames and is stopped warm
    with pytest.raises(ColdStop):
        subject.execute(message)
    # THEN it goes back as a new message carrying that progress, not released into the dead letters
    assert handler.attempts == [(3, 0)] and queue.deleted == [message.message_id]
    assert _sent_again(queue, subject, message).progress_frames == 30
    assert queue.dead_letters(QUEUE) == []


def test_an_engine_drained_by_sigterm_on_the_last_delivery_after_checkpointing_sends_the_segment_again() -> None:
    # GIVEN a segment whose first two attempts failed, its last delivery taken
    handler = StoppedHandler(frames=50, stop=GivenBack)
    queue, subject, message = _last_delivery_after_two_failures(handler)
    # WHEN its engine is drained by SIGTERM after checkpointing 50 frames (the soak at d178337 lost a
    # 3-minute job this way: the segment was released, and the next receive dead-lettered it)
    subject.execute(message)
    # THEN it goes back as a new message carrying that progress, not released into the dead letters
    assert queue.deleted == [message.message_id]
    assert _sent_again(queue, subject, message).progress_frames == 50
    assert queue.dead_letters(QUEUE) == []


@pytest.mark.parametrize("stop", [ColdStop, GivenBack], ids=["worker stopped warm", "engine drained by SIGTERM"])
def test_a_warm_stop_before_the_last_delivery_releases_it_as_before(stop: type[ColdStop | GivenBack]) -> None:
    # GIVEN a segment's first delivery, stopped warm after checkpointing
    handler = StoppedHandler(frames=30, stop=stop)
    _queue, _orchestrator, subject = _one_segment(handler)
    message = subject.take()
    assert message is not None
    # (the worker's own stop reaches its caller; an engine's drain ends the render)
    with pytest.raises(ColdStop) if stop is ColdStop else contextlib.nullcontext():
        subject.execute(message)
    # THEN the same message is visible again at once (its receive count still tells SQS the truth)
    again = subject.take()
    assert again is not None and again.message_id == message.message_id and again.receive_count == 2


class NeverRenders:
    def render(
        self, task: RenderTask, attempt: Attempt, cancel: threading.Event, stopping: threading.Event
    ) -> Callable[[], SegmentResult]:
        raise AssertionError("counting attempts renders nothing")

    def close(self) -> None:
        return None


def test_the_render_handler_counts_failed_attempts_from_their_records_and_a_missing_one_as_killed() -> None:
    # GIVEN attempt records of a segment: 1 failed, 2 still "running" (its worker was killed), 3 never
    # written (killed before it wrote one), 4 released by a warm stop
    storage, job = FakeStorage(), job_context()
    segment = halves()[0]
    records = [
        SegmentAttempt(job_id=job.job_id, index=segment.index, run=job.run, attempt=1, status="failed"),
        SegmentAttempt(job_id=job.job_id, index=segment.index, run=job.run, attempt=2, status="running"),
        SegmentAttempt(job_id=job.job_id, index=segment.index, run=job.run, attempt=4, status="released"),
    ]
    for record in records:
        number = record.attempt
        key = layout.attempt_record_key(job.job_id, segment.index, job.run, number)
        storage.put_bytes(WORK, key, record.model_dump_json().encode(), "application/json")
    handler = RenderHandler(NeverRenders(), storage, "w1", threading.Event())
    task = RenderTask(task_token="t", job=job, segment=segment)
    # THEN only the recorded failure counts; the others are the host's doing, not the segment's
    assert handler.standing(task, range(1, 5)).progress == Progress(saved_frames=0, failed_attempts=1)
    assert handler.standing(task, range(2, 5)).progress == Progress(saved_frames=0, failed_attempts=0)
