"""Task handlers for tests of the worker loop: `StepHandler`, the shape they share, and `ScriptedHandler`, which
plays a script of outcomes for tests of the loop's failure handling; `ScriptedRenderer` for the real render
handler, and `render_interrupted`, a worker rendering while something happens."""

from __future__ import annotations

import threading
import time
from abc import abstractmethod
from collections.abc import Callable
from typing import TypeVar

from fusionfleet.errors import InputRejected, SegmentFailed
from fusionfleet.messages import RenderTask, SegmentResult
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.facts import Failure, JobLost, Names, Note, Standing
from gpu_worker.delivery.keeper import KeepPolicy
from gpu_worker.delivery.loop import Worker
from gpu_worker.delivery.retry import RetryPolicy
from gpu_worker.delivery.tasks import RenderHandler, TaskHandler, no_progress
from gpu_worker.errors import Blocked, Cancelled, GivenBack
from gpu_worker.lifecycle.stopping import StopSignal
from tests.support.fakes import FakeOrchestrator, FakeQueue
from tests.support.tasks import StubTask

QUEUE = "https://sqs.fake/render-normal"


StepT = TypeVar("StepT", bound=StubTask)


class StepHandler(TaskHandler[StepT]):
    """A render handler whose task is a `task_model` read from its JSON, described by its token, and done whole
    in `execute` (the engine's part and the finish at once)."""

    role = "render"
    task_model: type[StepT]

    def parse(self, body: str) -> StepT:
        return self.task_model.model_validate_json(body)

    def describe(self, task: StepT) -> Names:
        return Names(f"step {task.task_token}", failed_as=f"step {task.task_token}")

    def start(self, task: StepT, cancel: threading.Event, attempt: Attempt) -> Callable[[], SegmentResult]:
        result = self.execute(task, cancel, attempt)
        return lambda: result

    @abstractmethod
    def execute(self, task: StepT, cancel: threading.Event, attempt: Attempt) -> SegmentResult: ...


class Step(StubTask):
    outcome: str  # ok | fail | reject | wait | superseded | blocked | blocked-once


class ScriptedHandler(StepHandler[Step]):
    """A task handler whose task says how it ends; `during` runs while a waiting task waits."""

    task_model = Step

    def __init__(self, during: Callable[[], None] | None = None) -> None:
        self.attempts: list[Attempt] = []
        self.recorded: list[tuple[str, str, str, int]] = []
        self.lost: list[tuple[str, str, int]] = []  # (token, cause, attempts) of each JobLost noted
        self._during = during

    def execute(self, task: Step, cancel: threading.Event, attempt: Attempt) -> SegmentResult:
        self.attempts.append(attempt)
        if task.outcome == "fail":
            raise SegmentFailed("the encoder fell over")
        if task.outcome == "reject":
            raise InputRejected("no face in source[0]")
        if task.outcome == "blocked" or (task.outcome == "blocked-once" and not task.prior_attempts):
            raise Blocked("w is blocklisted for the job")
        if task.outcome == "blocked-once":
            raise SegmentFailed("the encoder fell over")
        if task.outcome in ("wait", "superseded"):
            if self._during:
                self._during()
            cancel.wait(10)
            raise Cancelled("cancelled")
        return SegmentResult(index=0, key="work/s/00000.mp4", frames=50, engine_s=1.5)

    def standing(self, task: Step, progress_of: range | None = None) -> Standing:
        superseded = "copy 1 on w2 committed the segment first" if task.outcome == "superseded" else None
        return Standing(stopped=task.outcome == "cancelled", superseded=superseded, progress=no_progress(progress_of))

    def note(self, task: Step, event: Note) -> None:
        match event:
            case JobLost(_, cause, attempts):
                self.lost.append((task.task_token, cause, attempts))
            case Failure(error, reason, attempt):
                self.recorded.append((task.task_token, error, reason, attempt))


class ScriptedRenderer:
    """Renders instantly, releases, or waits until cancelled, as the test says."""

    def __init__(self, outcome: str = "ok") -> None:
        self.outcome = outcome
        self.rendered = 0

    def render(
        self, task: RenderTask, attempt: Attempt, cancel: threading.Event, stopping: threading.Event
    ) -> Callable[[], SegmentResult]:
        if self.outcome == "release":
            raise GivenBack("checkpointed before frame 50")
        if self.outcome == "wait":
            if not cancel.wait(10):
                raise AssertionError("the cancel was not noticed")
            raise RuntimeError("interrupted")
        self.rendered += 1
        return lambda: SegmentResult(index=task.segment.index, key="k", frames=25, engine_s=0.75)

    def close(self) -> None:
        return None


def render_interrupted(
    handler: RenderHandler, queue: FakeQueue, orchestrator: FakeOrchestrator, url: str, during: Callable[[], object]
) -> None:
    """A worker takes the one message on `url` and renders it with `handler` (a render that ends only when
    stopped) while `during` runs half a second in; it must be done with the message within 5 s."""
    worker = Worker(
        "w", [url], handler, queue, orchestrator, RetryPolicy(max_attempts=3),
        KeepPolicy(visibility_s=600, cancel_check_s=0.2), StopSignal(), idle_wait_s=0,
    )  # fmt: skip
    threading.Timer(0.5, during).start()
    began = time.monotonic()
    message = worker.take()
    assert message is not None
    worker.execute(message)
    assert time.monotonic() - began < 5
