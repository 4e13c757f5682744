"""A job's content analysis, its own step before the Map (the render queues take it beside segments: render_queue.py).

The state machine sends a FaceFusion job's analysis to the job's render queue (fusionfleet.messages.
AnalysisTask), so the workers that will render its segments make its verdict with the same engine,
in the engine process, within a limit that follows the whole target's length
(gpu_worker.hosting.engine_host.HostPolicy.analysis_timeout_s), heartbeating its token as for any task. A
refused verdict fails the step at once (the target is what it is: no retry); the job then ends with
a failure notice before any segment was sent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import InputRejected
from fusionfleet.facefusion.content_analysis import ContentVerdict, refusal_reason
from fusionfleet.jobs.loss import is_job_failed
from fusionfleet.jobs.runs import is_cancelled
from fusionfleet.messages import AnalysisTask
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.facts import Names, Standing
from gpu_worker.delivery.tasks import TaskHandler, no_progress

logger = logging.getLogger(__name__)


class Analyser(Protocol):
    """Makes a job's verdict with the worker's engine: in its engine process (EngineHost) or inline."""

    def analyse(
        self, task: AnalysisTask, attempt: Attempt, cancel: threading.Event, stopping: threading.Event
    ) -> ContentVerdict: ...


class AnalysisHandler(TaskHandler[AnalysisTask]):
    role = "render"

    def __init__(self, analyser: Analyser, storage: Storage, stopping: threading.Event) -> None:
        self._analyser = analyser
        self._storage = storage
        self._stopping = stopping

    def parse(self, body: str) -> AnalysisTask:
        return AnalysisTask.model_validate_json(body)

    def describe(self, task: AnalysisTask) -> Names:
        return Names(f"content analysis of {task.job.job_id}")

    def start(self, task: AnalysisTask, cancel: threading.Event, attempt: Attempt) -> Callable[[], ContentVerdict]:
        verdict = self._analyser.analyse(task, attempt, cancel, self._stopping)
        if verdict.refused:
            raise InputRejected(refusal_reason(verdict))
        logger.info(
            "%s: %s of %s sampled frames flagged: passed", self.describe(task).what, verdict.flagged, verdict.sampled
        )
        return lambda: verdict

    def standing(self, task: AnalysisTask, progress_of: range | None = None) -> Standing:
        job = task.job
        stopped = is_cancelled(self._storage, job.work_bucket, job.job_id) or is_job_failed(
            self._storage, job.work_bucket, job.job_id
        )
        return Standing(stopped=stopped, progress=no_progress(progress_of))
