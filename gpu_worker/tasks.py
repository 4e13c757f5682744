"""What a worker does with a message, by role: parse it, execute it, record a failed attempt."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from fusionfleet.failures import segment_failure, segment_label
from fusionfleet.messages import MergeResult, MergeTask, RenderTask, SegmentResult
from fusionfleet.storage import Storage
from gpu_worker.attempt import Attempt
from gpu_worker.merge import MergeDeps, merge_job
from gpu_worker.render import record_failure


class Renderer(Protocol):
    """Renders one segment: in a supervised child process (EngineHost) or inline (InlineRenderer)."""

    def render(
        self, task: RenderTask, attempt: Attempt, cancel: threading.Event, stopping: threading.Event
    ) -> SegmentResult: ...

    def close(self) -> None: ...


class TaskHandler(Protocol):
    role: str

    def parse(self, body: str) -> Any: ...
    def describe(self, task: Any) -> str: ...
    def execute(self, task: Any, cancel: threading.Event, attempt: Attempt) -> SegmentResult | MergeResult: ...
    def record_failure(self, task: Any, error: str, reason: str, attempt: int) -> None: ...
    def failure_cause(self, task: Any, error: str, reason: str, attempts: int) -> str: ...
    def close(self) -> None: ...


class RenderHandler:
    role = "render"

    def __init__(self, renderer: Renderer, storage: Storage, worker: str, stopping: threading.Event) -> None:
        self._renderer = renderer
        self._storage = storage
        self._worker = worker
        self._stopping = stopping

    def parse(self, body: str) -> RenderTask:
        return RenderTask.model_validate_json(body)

    def describe(self, task: RenderTask) -> str:
        return f"segment {task.segment.index} of {task.job.job_id}"

    def execute(self, task: RenderTask, cancel: threading.Event, attempt: Attempt) -> SegmentResult:
        return self._renderer.render(task, attempt, cancel, self._stopping)

    def record_failure(self, task: RenderTask, error: str, reason: str, attempt: int) -> None:
        record_failure(self._storage, task, error, reason, attempt, self._worker)

    def failure_cause(self, task: RenderTask, error: str, reason: str, attempts: int) -> str:
        segment = task.segment
        label = f"{segment_label(segment.index, segment.start_frame, segment.end_frame)} of {task.job.job_id}"
        return segment_failure(label, attempts, error, reason)

    def close(self) -> None:
        self._renderer.close()


class MergeHandler:
    role = "merge"

    def __init__(self, deps: MergeDeps) -> None:
        self._deps = deps

    def parse(self, body: str) -> MergeTask:
        return MergeTask.model_validate_json(body)

    def describe(self, task: MergeTask) -> str:
        return f"merge of {task.job.job_id}"

    def execute(self, task: MergeTask, cancel: threading.Event, attempt: Attempt) -> MergeResult:
        return merge_job(task, self._deps)

    def record_failure(self, task: MergeTask, error: str, reason: str, attempt: int) -> None:
        return None

    def failure_cause(self, task: MergeTask, error: str, reason: str, attempts: int) -> str:
        # The gate's reason already names each segment, its frames, attempts and last error.
        return f"merge of {task.job.job_id}: {reason}"

    def close(self) -> None:
        return None
