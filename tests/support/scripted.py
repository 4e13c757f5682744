"""Task handlers for tests of the worker loop: `StepHandler`, the shape they share, and `ScriptedHandler`, which
plays a script of outcomes for tests of the loop's failure handling."""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Callable
from typing import TypeVar

from fusionfleet.errors import InputRejected, SegmentFailed
from fusionfleet.messages import SegmentResult
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.tasks import TaskHandler
from gpu_worker.errors import Blocked, Cancelled
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

    def describe(self, task: StepT) -> str:
        return f"step {task.task_token}"

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
        self.lost: list[tuple[str, str, int]] = []  # (token, cause, attempts) of job_lost
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

    def cancelled(self, task: Step) -> bool:
        return task.outcome == "cancelled"

    def job_lost(self, task: Step, error: str, cause: str, attempts: int) -> None:
        self.lost.append((task.task_token, cause, attempts))

    def superseded(self, task: Step) -> str | None:
        return "copy 1 on w2 committed the segment first" if task.outcome == "superseded" else None

    def record_failure(self, task: Step, error: str, reason: str, attempt: int) -> None:
        self.recorded.append((task.task_token, error, reason, attempt))

    def failure_cause(self, task: Step, error: str, reason: str, attempts: int) -> str:
        return f"step {task.task_token} failed after {attempts}: {error}: {reason}"
