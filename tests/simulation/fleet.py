"""Render workers in the simulation: the real loop's message handling with the engine stood in.

A simulated worker is the production `gpu_worker.delivery.loop.Worker` with the production `RenderHandler`:
it takes a message (`Worker.take`), checks it (`_take_checks`: the first beat, its job's markers), asks
`decide` how it ends and `Settler.settle` carries that out (delete, give back, resend, change visibility,
task success or failure), and runs its task through `RenderHandler.start` (attempt records, the winner
check, the hold record) to the real `finish_segment` (upload, `commit`, checkpoints cleared). Two parts
are stood in, no more:

- the keeper: the loop keeps a message from a thread that beats every third of the visibility timeout;
  here `SimKeeper` makes the same calls, with the same losses (`Loss`, `LossKind`), from the render's
  own steps, on the virtual clock, so a worker that stalls (the scheduler leaves it paused while the
  clock moves) lets its visibility lapse, as a stalled process does;
- the engine: `StandInRenderer` renders in steps (a checkpoint each, so a schedule can kill or stall the
  worker between them) and ends as the schedule chose: its frames (one chunk file whose bytes name the
  worker and the attempt, so two renders of a segment differ), an engine error, retryable or not. The
  chunk is one file, so finish_segment joins nothing, and its probe (ffprobe) answers the planned count.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from fusionfleet.adapters.orchestrator import TaskCallbacks
from fusionfleet.adapters.queues import QueueMessage, ReceiptExpired
from fusionfleet.errors import TokenGone
from fusionfleet.messages import RenderTask, SegmentResult
from gpu_worker.attempt import Attempt
from gpu_worker.delivery.keeper import Keeper, KeepPolicy, Loss, LossKind
from gpu_worker.delivery.loop import Worker
from gpu_worker.delivery.retry import RetryPolicy
from gpu_worker.delivery.tasks import RenderHandler
from gpu_worker.errors import Cancelled, EngineFailure
from gpu_worker.lifecycle.stopping import StopSignal
from gpu_worker.rendering.encoded_segment import RenderedFrames
from gpu_worker.rendering.render import finish_segment
from tests.simulation.aws import SimStorage
from tests.simulation.scheduler import Scheduler
from tests.simulation.sqs import SimQueue
from tests.support.fakes import Clock

VISIBILITY_S = 60  # the render queue's visibility timeout here: a stall past it is a clock jump of 61 s
RENDER_STEPS = 3  # a render's steps: the schedule may kill or stall the worker between any two
OUTCOMES = ("frames", "frames", "frames", "engine error", "engine error for good")


class SimKeeper(Keeper):
    """The keeper's beat (gpu_worker.delivery.keeper.Keeper._run), made from the render's steps on the
    virtual clock rather than from a thread: the job's standing looked at each step; the visibility
    extended and the token beaten once a third of the visibility has passed since the last beat."""

    def __init__(self, clock: Clock, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._clock = clock
        self._next_beat = clock() + self._policy.interval_s()

    def start(self) -> None:
        return None  # no thread: `tick` is called from the render's steps

    def stop(self) -> None:
        self._stop.set()

    def tick(self) -> None:
        if self._stop.is_set() or self.lost.is_set():
            return
        standing = self._look()
        if standing.stopped:
            self._lose(Loss(LossKind.JOB_CANCELLED, "the job's cancel or failed marker is set", standing.token_cause))
            return
        if standing.superseded:
            self._lose(Loss(LossKind.SUPERSEDED, standing.superseded))
            return
        if self._clock() < self._next_beat:
            return
        try:
            self._next_beat = self._clock() + self._policy.interval_s()
            self._queue.change_visibility(self._message, self._policy.visibility_s)
            if self._token:
                self._orchestrator.heartbeat(self._token)
        except TokenGone as error:
            self._lose(Loss(LossKind.TOKEN_GONE, error.reason))
        except ReceiptExpired as error:
            self._lose(Loss(LossKind.REDELIVERED, f"receipt expired: {error}"))


class StandInRenderer:
    """The Renderer protocol without an engine: `RENDER_STEPS` steps, then the outcome the schedule chose."""

    def __init__(self, worker_name: str, storage: SimStorage, scheduler: Scheduler, outcome: str) -> None:
        self.worker_name = worker_name
        self.storage = storage
        self.scheduler = scheduler
        self.outcome = outcome
        self.keeper: SimKeeper | None = None
        self.started: list[tuple[str, int, int]] = []  # (job, segment, attempt) of each render begun

    def render(
        self, task: RenderTask, attempt: Attempt, cancel: threading.Event, stopping: threading.Event
    ) -> Callable[[], SegmentResult]:
        job, segment = task.job, task.segment
        self.started.append((job.job_id, segment.index, attempt.number))
        for step in range(RENDER_STEPS):
            self.scheduler.checkpoint(f"engine renders step {step + 1} of segment {segment.index}")
            if self.keeper is not None:
                self.keeper.tick()
            if cancel.is_set():
                raise Cancelled(f"segment {segment.index} of {job.job_id}: the hold on its message was lost")
        if self.outcome == "engine error":
            raise EngineFailure("EngineError", "the engine crashed (stand-in)", retryable=True)
        if self.outcome == "engine error for good":
            raise EngineFailure("InputRejected", "the engine cannot render these inputs (stand-in)", retryable=False)
        workdir = Path(tempfile.mkdtemp(prefix="fusionfleet-sim-segment-"))
        grid = ((segment.start_frame, segment.end_frame),)
        chunk = workdir / f"{segment.start_frame:07d}-{segment.end_frame:07d}.mp4"
        made_by = f"{job.job_id} segment {segment.index} by {self.worker_name} attempt {attempt.number}"
        chunk.write_bytes(made_by.encode())
        now = time.time()
        frames = RenderedFrames(
            task=task, workdir=workdir, grid=grid, resumed_from=-1, frames_rendered=segment.frame_count,
            engine_s=1.0, started_at=now, rendered_at=now, bytes_read=0,
        )  # fmt: skip
        return lambda: finish_segment(frames, self.storage, self.worker_name, attempt).output

    def close(self) -> None:
        return None


class SimWorker(Worker[RenderTask]):
    """The loop with its keeper made of the render's steps (SimKeeper)."""

    def __init__(self, name: str, queue_url: str, renderer: StandInRenderer, queue: SimQueue,
                 orchestrator: TaskCallbacks, storage: SimStorage, clock: Clock) -> None:  # fmt: skip
        handler = RenderHandler(renderer, storage, name, threading.Event())
        keep = KeepPolicy(visibility_s=VISIBILITY_S)
        super().__init__(
            name, [queue_url], handler, queue, orchestrator, RetryPolicy(), keep, StopSignal(),
            idle_wait_s=0, take_recheck_s=0.0, token_grace_s=0.0,
        )  # fmt: skip
        self.renderer = renderer
        self._clock = clock
        self.took: QueueMessage | None = None
        self.cancelled_before = False  # started after the job's cancel had ended (set by the schedule)

    def _keeper(self, message: QueueMessage, task: RenderTask, on_keep: Callable[[], None] | None = None) -> Keeper:
        keeper = SimKeeper(
            self._clock, self._queue, self._orchestrator, message, task.task_token, self._keep,
            standing=lambda: self._handler.standing(task), on_keep=on_keep,
        )  # fmt: skip
        self.renderer.keeper = keeper
        return keeper

    def take_one(self) -> str:
        """One turn of the loop: take a message and see it to its end (or find the queue empty)."""
        message = self.take()
        if message is None:
            return "idle"
        self.took = message
        self.execute(message)
        return "handled"
