"""A render queue's two kinds of task: a job's segments to render and its content analysis (the step
before the Map, analysis_task.py), each passed to its own handler."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from fusionfleet.messages import AnalysisTask, RenderTask, parse_render_queue_message
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.analysis_task import AnalysisHandler
from gpu_worker.delivery.facts import Names, Note, Standing
from gpu_worker.delivery.tasks import Output, RenderHandler, TaskHandler

RenderQueueTask = RenderTask | AnalysisTask


class RenderQueueHandler(TaskHandler[RenderQueueTask]):
    """A render queue's messages: segments to render, and jobs' content analyses, each to its own handler."""

    role = "render"

    def __init__(self, render: RenderHandler, analysis: AnalysisHandler) -> None:
        self.render = render
        self.analysis = analysis

    def _of(self, task: RenderQueueTask) -> TaskHandler[Any]:
        return self.analysis if isinstance(task, AnalysisTask) else self.render

    def parse(self, body: str) -> RenderQueueTask:
        return parse_render_queue_message(body)

    def describe(self, task: RenderQueueTask) -> Names:
        return self._of(task).describe(task)

    def start(self, task: RenderQueueTask, cancel: threading.Event, attempt: Attempt) -> Callable[[], Output]:
        return self._of(task).start(task, cancel, attempt)

    # Every hook the loop calls goes to the task's own handler: a wrapper that fell back to the defaults
    # would silently drop the render handler's (its next segment's decoder, its budget hold, its billing).
    def standing(self, task: RenderQueueTask, progress_of: range | None = None) -> Standing:
        return self._of(task).standing(task, progress_of)

    def note(self, task: RenderQueueTask, event: Note) -> None:
        self._of(task).note(task, event)

    def close(self) -> None:
        self.render.close()  # the renderer both share
