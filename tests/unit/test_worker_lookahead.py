"""Taking the next task while one renders (gpu_worker.delivery.lookahead), on an in-memory queue and orchestrator."""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable

from fusionfleet.adapters.queues import QueueMessage
from fusionfleet.environment.settings import FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG
from fusionfleet.environment.worker import WorkerEnvironment
from fusionfleet.errors import SegmentFailed
from fusionfleet.messages import SegmentResult
from gpu_worker.attempt import Attempt
from gpu_worker.config import add_arguments, resolve
from gpu_worker.delivery.facts import Failure, Names, Note, Standing
from gpu_worker.delivery.keeper import Keeper, KeepPolicy
from gpu_worker.delivery.lookahead import Lookahead, LookaheadPolicy
from gpu_worker.delivery.loop import Worker
from gpu_worker.delivery.retry import RetryPolicy
from gpu_worker.delivery.tasks import TaskHandler, no_progress
from gpu_worker.lifecycle.stopping import StopSignal
from tests.support.fakes import FakeOrchestrator, FakeQueue
from tests.support.scripted import StepHandler
from tests.support.tasks import StubTask

QUEUE = "https://sqs.fake/render-normal"


class Step(StubTask):
    cancelled: bool = False


class WatchingHandler(StepHandler[Step]):
    """Renders by waiting until the lookahead has looked (or `hold_s` passed); notes the queue as it starts."""

    task_model = Step

    def __init__(
        self,
        queue: FakeQueue,
        hold_s: float = 0.0,
        on_first: threading.Event | None = None,
        after_first: Callable[[], object] | None = None,
    ) -> None:
        self.queue = queue
        self.hold_s = hold_s
        self.rendered: list[str] = []
        self.visible_during: list[int] = []
        self.subject: Worker[Step] | None = None
        self.cancelled_jobs: set[str] = set()  # tokens whose job an operator cancelled
        self._on_first = on_first
        self._after_first = after_first

    def execute(self, task: Step, cancel: threading.Event, attempt: Attempt) -> SegmentResult:
        self.rendered.append(task.task_token)
        deadline = time.monotonic() + 5
        # Long enough for the lookahead thread to finish its look: what a real render gives it.
        while time.monotonic() < deadline and not self._looked():
            time.sleep(0.01)
        if self._after_first is not None and len(self.rendered) == 1:
            self._after_first()
        time.sleep(self.hold_s)
        self.visible_during.append(self.queue.depth(QUEUE).visible)
        if self._on_first is not None and len(self.rendered) == 1:
            self._on_first.set()
        return SegmentResult(index=0, key="work/s/00000.mp4", frames=50, engine_s=1.5)

    def _looked(self) -> bool:
        thread = self.subject.lookahead._thread if self.subject is not None else None
        return thread is None or not thread.is_alive()

    def standing(self, task: Step, progress_of: range | None = None) -> Standing:
        stopped = task.cancelled or task.task_token in self.cancelled_jobs
        return Standing(stopped=stopped, progress=no_progress(progress_of))


def worker(
    handler: WatchingHandler,
    queue: FakeQueue,
    orchestrator: FakeOrchestrator,
    min_backlog: int,
    stop: StopSignal | None = None,
) -> Worker[Step]:
    subject = Worker(
        "w", [QUEUE], handler, queue, orchestrator, RetryPolicy(max_attempts=3),
        KeepPolicy(visibility_s=60, cancel_check_s=0.2), stop or StopSignal(), idle_wait_s=0,
        lookahead=LookaheadPolicy(min_backlog),
    )  # fmt: skip
    handler.subject = subject
    return subject


def queued(queue: FakeQueue, *steps: Step) -> list[str]:
    queue.create(QUEUE)
    return [queue.send(QUEUE, step.wire_json()) for step in steps]


def test_the_policy_takes_early_only_from_a_backlog_as_deep_as_its_setting() -> None:
    assert LookaheadPolicy(2).worth_taking(2) and LookaheadPolicy(2).worth_taking(9)
    assert not LookaheadPolicy(2).worth_taking(1)
    assert not LookaheadPolicy(0).worth_taking(100)


def test_with_a_deep_backlog_the_next_task_is_taken_while_one_renders_and_each_runs_once_in_order() -> None:
    # GIVEN four tasks queued and a worker that looks ahead from a backlog of 2
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    ids = queued(queue, *(Step(task_token=f"t{n}") for n in range(4)))
    handler = WatchingHandler(queue)
    subject = worker(handler, queue, orchestrator, min_backlog=2)
    # WHEN it works through them
    assert subject.run(max_tasks=4) == 4
    # THEN each rendered once, in queue order, and succeeded; every message is deleted
    assert handler.rendered == ["t0", "t1", "t2", "t3"]
    assert [token for kind, token, _ in orchestrator.calls if kind == "success"] == ["t0", "t1", "t2", "t3"]
    assert sorted(queue.deleted) == sorted(ids)
    # AND while t0 and t1 rendered, their successor was already taken (two, then one, left visible);
    # while t2 rendered the backlog (t3 alone) was too shallow to take from early
    assert handler.visible_during == [2, 1, 1, 0]
    assert subject.lookahead.taken == 2
    # AND nothing was handed back
    assert all(seconds != 0 for _, seconds in queue.visibility_changes)


def test_with_lookahead_off_the_next_task_stays_in_the_queue_while_one_renders() -> None:
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    queued(queue, *(Step(task_token=f"t{n}") for n in range(3)))
    handler = WatchingHandler(queue)
    subject = worker(handler, queue, orchestrator, min_backlog=0)
    assert subject.run(max_tasks=3) == 3
    assert handler.visible_during == [2, 1, 0]
    assert subject.lookahead.taken == 0


def test_a_worker_that_stops_releases_the_task_it_took_early_without_rendering_it() -> None:
    # GIVEN three tasks, and a stop asked for while the first renders (after its successor was taken)
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    ids = queued(queue, *(Step(task_token=f"t{n}") for n in range(3)))
    stop = StopSignal()
    handler = WatchingHandler(queue, after_first=stop.requested.set)
    subject = worker(handler, queue, orchestrator, min_backlog=2, stop=stop)
    # WHEN it runs
    subject.run()
    # THEN only the first rendered; the one taken early is visible again at once, not deleted
    assert handler.rendered == ["t0"]
    assert subject.lookahead.taken == 1
    assert (ids[1], 0) in queue.visibility_changes
    assert ids[1] not in queue.deleted and queue.depth(QUEUE).visible == 2


def test_a_task_taken_early_on_its_last_delivery_goes_back_as_a_new_message_not_to_the_dead_letters() -> None:
    # GIVEN a queue that dead-letters after one receive, three tasks, and a stop asked for while the
    # first renders (after its successor was taken early, spending that successor's only receive)
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    queue.create(QUEUE, max_receive_count=1)
    ids = [queue.send(QUEUE, Step(task_token=f"t{n}").wire_json()) for n in range(3)]
    stop = StopSignal()
    handler = WatchingHandler(queue, after_first=stop.requested.set)
    subject = worker(handler, queue, orchestrator, min_backlog=2, stop=stop)
    # WHEN it runs
    subject.run()
    # THEN the task taken early was not rendered and went back as a new message with no attempt counted
    assert handler.rendered == ["t0"] and subject.lookahead.taken == 1
    assert ids[1] in queue.deleted
    again = queue.receive(QUEUE, wait_s=0, visibility_s=60, max_messages=10)
    tokens = {Step.model_validate_json(message.body).task_token: message for message in again}
    assert set(tokens) == {"t1", "t2"}
    assert tokens["t1"].message_id != ids[1] and tokens["t1"].receive_count == 1
    assert Step.model_validate_json(tokens["t1"].body).prior_attempts == 0
    assert queue.dead_letters(QUEUE) == []


def test_a_task_of_a_cancelled_job_is_dropped_when_taken_early_not_held() -> None:
    # GIVEN a first task and, behind it, a task of a cancelled job and another
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    ids = queued(queue, Step(task_token="t0"), Step(task_token="gone", cancelled=True), Step(task_token="t2"))
    handler = WatchingHandler(queue)
    subject = worker(handler, queue, orchestrator, min_backlog=2)
    # WHEN it works through the queue
    subject.run(max_tasks=2)
    # THEN the cancelled job's task was looked at as it was taken, deleted unrendered, and not held
    assert handler.rendered == ["t0", "t2"]
    assert ids[1] in queue.deleted and subject.lookahead.taken == 0
    assert "gone" not in [token for kind, token, _ in orchestrator.calls if kind == "success"]


def test_a_task_whose_job_is_cancelled_while_it_waits_its_turn_is_dropped_unrendered() -> None:
    # GIVEN a long first task, two behind it, and the second's job cancelled once it was taken early
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    ids = queued(queue, Step(task_token="t0"), Step(task_token="late"), Step(task_token="t2"))
    handler = WatchingHandler(queue, hold_s=0.8, after_first=lambda: handler.cancelled_jobs.add("late"))
    subject = worker(handler, queue, orchestrator, min_backlog=2)
    # WHEN it works through the queue
    subject.run(max_tasks=3)
    # THEN the task was taken early, its keeper saw the cancel, and it was deleted unrendered
    assert subject.lookahead.taken >= 1
    assert handler.rendered == ["t0", "t2"]
    assert ids[1] in queue.deleted
    assert "late" not in [token for kind, token, _ in orchestrator.calls if kind == "success"]


def test_a_task_taken_early_gives_way_to_higher_priority_work_that_arrived_while_it_waited() -> None:
    # GIVEN a worker on a high and a normal queue, three normal tasks, and a high task sent while the
    # first normal one renders (after the second was taken early)
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    high = "https://sqs.fake/render-high"
    queue.create(high)
    ids = queued(queue, *(Step(task_token=f"n{n}") for n in range(3)))
    handler = WatchingHandler(queue, after_first=lambda: queue.send(high, Step(task_token="h").wire_json()))
    subject = Worker(
        "w", [high, QUEUE], handler, queue, orchestrator, RetryPolicy(max_attempts=3),
        KeepPolicy(visibility_s=60), StopSignal(), idle_wait_s=0, lookahead=LookaheadPolicy(2),
    )  # fmt: skip
    handler.subject = subject
    # WHEN it works through them
    subject.run(max_tasks=4)
    # THEN the high task went second: the normal task taken early was handed back and rendered later
    assert handler.rendered[:2] == ["n0", "h"]
    assert sorted(handler.rendered) == ["h", "n0", "n1", "n2"]
    assert (ids[1], 0) in queue.visibility_changes


class FinishingHandler(TaskHandler[Step]):
    """The engine part returns at once; the finish step takes `finish_s` (or fails for `fail_token`)."""

    role = "render"

    def __init__(self, finish_s: float = 0.3, fail_token: str | None = None) -> None:
        self.finish_s = finish_s
        self.fail_token = fail_token
        self.events: list[tuple[str, str]] = []
        self.failures: list[str] = []
        self._lock = threading.Lock()

    def _note(self, what: str, token: str) -> None:
        with self._lock:
            self.events.append((what, token))

    def parse(self, body: str) -> Step:
        return Step.model_validate_json(body)

    def describe(self, task: Step) -> Names:
        return Names(f"step {task.task_token}")

    def start(self, task: Step, cancel: threading.Event, attempt: Attempt) -> Callable[[], SegmentResult]:
        self._note("rendered", task.task_token)

        def finish() -> SegmentResult:
            time.sleep(self.finish_s)
            if task.task_token == self.fail_token:
                self._note("failed", task.task_token)
                raise SegmentFailed("segment 0 has 49 frames, planned 50")
            self._note("finished", task.task_token)
            return SegmentResult(index=0, key="work/s/00000.mp4", frames=50, engine_s=1.5)

        return finish

    def note(self, task: Step, event: Note) -> None:
        if isinstance(event, Failure):
            self.failures.append(f"{task.task_token}: {event.error}")


def finishing_worker(
    handler: FinishingHandler, queue: FakeQueue, orchestrator: FakeOrchestrator, min_backlog: int
) -> Worker[Step]:
    return Worker(
        "w", [QUEUE], handler, queue, orchestrator, RetryPolicy(max_attempts=3),
        KeepPolicy(visibility_s=60), StopSignal(), idle_wait_s=0, lookahead=LookaheadPolicy(min_backlog),
    )  # fmt: skip


def test_with_lookahead_the_next_segment_renders_while_the_last_one_finishes_each_reported_after_its_finish() -> None:
    # GIVEN three tasks whose finish (join, check, upload, commit) takes a while
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    ids = queued(queue, *(Step(task_token=f"t{n}") for n in range(3)))
    handler = FinishingHandler(finish_s=0.3)
    # WHEN a worker that looks ahead works through them
    assert finishing_worker(handler, queue, orchestrator, min_backlog=2).run(max_tasks=3) == 3
    # THEN each next task's engine part began before the task before it had finished
    order = handler.events
    for earlier, later in (("t0", "t1"), ("t1", "t2")):
        assert order.index(("rendered", later)) < order.index(("finished", earlier))
    # AND at most one task was finishing at a time, in order
    assert [token for what, token in order if what == "finished"] == ["t0", "t1", "t2"]
    # AND every task was reported as a success once, and its message deleted, after its finish
    assert [token for kind, token, _ in orchestrator.calls if kind == "success"] == ["t0", "t1", "t2"]
    assert sorted(queue.deleted) == sorted(ids)


def test_with_lookahead_off_a_segment_finishes_before_the_next_one_renders() -> None:
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    queued(queue, *(Step(task_token=f"t{n}") for n in range(2)))
    handler = FinishingHandler(finish_s=0.05)
    assert finishing_worker(handler, queue, orchestrator, min_backlog=0).run(max_tasks=2) == 2
    assert handler.events == [("rendered", "t0"), ("finished", "t0"), ("rendered", "t1"), ("finished", "t1")]


def test_a_segment_that_fails_while_finishing_in_the_background_is_retried_like_any_failed_attempt() -> None:
    # GIVEN three tasks, the first of which fails its check while the second renders
    queue, orchestrator = FakeQueue(), FakeOrchestrator()
    ids = queued(queue, *(Step(task_token=f"t{n}") for n in range(3)))
    handler = FinishingHandler(finish_s=0.2, fail_token="t0")
    # WHEN a worker that looks ahead works through them
    finishing_worker(handler, queue, orchestrator, min_backlog=2).run(max_tasks=3)
    # THEN the failure was recorded and the message put back for a retry after the policy's delay, not deleted
    assert handler.failures == ["t0: SegmentFailed"]
    assert ids[0] not in queue.deleted
    assert (ids[0], RetryPolicy(max_attempts=3).delay_s(1)) in queue.visibility_changes
    # AND no success was reported for it, while the others succeeded
    assert [token for kind, token, _ in orchestrator.calls if kind == "success"] == ["t1", "t2"]


def test_a_render_worker_looks_ahead_only_when_the_environment_asks() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--queue-url", QUEUE, "--region", "eu-west-1"])
    assert WorkerEnvironment.lookahead_min_backlog == 0
    assert resolve(args, env={}).lookahead_min_backlog == 0
    assert resolve(args, env={FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG: "2"}).lookahead_min_backlog == 2


class QueueTaker:
    """Takes from the queue as a worker would; every task is wanted and none needs keeping."""

    def __init__(self, queue: FakeQueue) -> None:
        self.queue = queue

    def take(self) -> QueueMessage | None:
        messages = self.queue.receive(QUEUE, wait_s=0, visibility_s=60)
        return messages[0] if messages else None

    def still_wanted(self, message: QueueMessage) -> bool:
        return True

    def keeper_until_turn(self, message: QueueMessage) -> Keeper | None:
        return None


def settling(queue: FakeQueue, settle_s: float) -> Lookahead:
    return Lookahead(LookaheadPolicy(1, settle_s=settle_s), queue, [QUEUE], QueueTaker(queue))


def test_a_look_waits_a_poll_so_that_idle_workers_take_the_visible_tasks_first() -> None:
    # GIVEN two tasks just sent, and a worker that began one render and looks ahead after 0.3 s
    queue = FakeQueue()
    queued(queue, Step(task_token="t0"), Step(task_token="t1"))
    look = settling(queue, 0.3)
    look.begin()
    # WHEN idle workers take both meanwhile
    assert queue.receive(QUEUE, wait_s=0, visibility_s=60) and queue.receive(QUEUE, wait_s=0, visibility_s=60)
    time.sleep(0.5)
    # THEN the look took nothing
    assert look.collect() is None and look.taken == 0


def test_a_backlog_still_there_after_the_settling_is_taken_early() -> None:
    queue = FakeQueue()
    queued(queue, Step(task_token="t0"))
    look = settling(queue, 0.1)
    look.begin()
    time.sleep(0.4)
    held = look.collect()
    assert held is not None and look.taken == 1 and queue.depth(QUEUE).visible == 0


def test_a_task_that_ends_while_the_look_settles_is_not_kept_waiting() -> None:
    queue = FakeQueue()
    queued(queue, Step(task_token="t0"))
    look = settling(queue, 30.0)
    look.begin()
    began = time.monotonic()
    assert look.collect() is None
    assert time.monotonic() - began < 1.0 and queue.depth(QUEUE).visible == 1
