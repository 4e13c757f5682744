"""The engine process: the child side of the engine host.

It builds its own render dependencies (clients, engines) once, then renders one segment's frames per
request until it is told to stop; the worker joins, checks and uploads them (render.finish_segment),
so this process is free for the next segment meanwhile. Requests and replies are small values sent
over a multiprocessing pipe; the task arrives parsed (a RenderTask pickles), so a task is parsed once,
by the worker loop. A job's content analysis (its own step) runs here too, with the same engine.
"""

from __future__ import annotations

import ctypes
import logging
import queue
import signal
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from fusionfleet.facefusion.content_analysis import ContentVerdict
from fusionfleet.messages import AnalysisTask, RenderTask
from gpu_worker.attempt import Attempt
from gpu_worker.config import HostConfig
from gpu_worker.delivery.retry import describe, retryable
from gpu_worker.errors import Drained
from gpu_worker.rendering.encoded_segment import RenderedFrames
from gpu_worker.rendering.job_analysis import analyse_job
from gpu_worker.rendering.render import RenderDeps, build_render_deps, render_frames

logger = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class RenderRequest:
    task: RenderTask
    attempt: Attempt


@dataclass(frozen=True)
class PrefetchRequest:
    """The worker holds `task` and renders it next: start decoding it while the current segment renders."""

    task: RenderTask


@dataclass(frozen=True)
class AnalyseRequest:
    """A job's content analysis (its own step before the Map): the verdict, made with this process's engine."""

    task: AnalysisTask
    attempt: Attempt


@dataclass(frozen=True)
class StopRequest:
    """Close the engines and exit."""


@dataclass(frozen=True)
class Rendered:
    frames: RenderedFrames


@dataclass(frozen=True)
class Analysed:
    verdict: ContentVerdict


@dataclass(frozen=True)
class Checkpointed:
    """A warm stop: the chunks before `next_frame` are saved, the rest is left for another worker."""

    next_frame: int


@dataclass(frozen=True)
class Failed:
    name: str
    reason: str
    retryable: bool


Request = RenderRequest | PrefetchRequest | AnalyseRequest | StopRequest
Reply = Rendered | Analysed | Checkpointed | Failed


def answer(request: RenderRequest | AnalyseRequest, deps: RenderDeps, drain: Any) -> Reply:
    """Render one requested segment (or analyse a job); every outcome becomes a reply, none escapes as an exception."""
    never = threading.Event()  # the parent cancels by killing this process
    try:
        if isinstance(request, AnalyseRequest):
            job = request.task.job
            return Analysed(analyse_job(deps.storage, deps.engines, job, deps.cpu_threads, deps.worker_id))
        return Rendered(render_frames(request.task, deps, never, request.attempt, drain))
    except Drained as stopped:
        return Checkpointed(stopped.next_frame)
    except Exception as error:
        name, reason = describe(error)
        return Failed(name, reason, retryable(error))


def serve(conn: Connection, deps: RenderDeps, drain: Any) -> None:
    """Answer render requests until a stop request (or the parent closing the pipe).

    A receiver thread reads the pipe, so a prefetch request is acted on while a segment renders; render
    and stop requests are answered in order by this thread.
    """
    inbox: queue.Queue[Request | None] = queue.Queue()

    def receive() -> None:
        while True:
            try:
                request: Request = conn.recv()
            except (EOFError, OSError):
                inbox.put(None)
                return
            if isinstance(request, PrefetchRequest):
                prefetch(request, deps)
                continue
            inbox.put(request)
            if isinstance(request, StopRequest):
                return

    threading.Thread(target=receive, name="requests", daemon=True).start()
    while True:
        request = inbox.get()
        if request is None or isinstance(request, StopRequest):
            return
        assert isinstance(request, RenderRequest | AnalyseRequest)
        conn.send(answer(request, deps, drain))


def prefetch(request: PrefetchRequest, deps: RenderDeps) -> None:
    """Start the next segment's decoder; a failure here only means it decodes when its turn comes."""
    if deps.prefetch is None:
        return
    try:
        deps.prefetch.prepare(request.task)
    except Exception:
        logger.warning("could not start decoding the next segment ahead", exc_info=True)


def main(conn: Connection, config: HostConfig, drain: Any) -> None:
    """The engine process's entry point (started with the spawn method)."""
    # Die with the worker (kill -9 included) and leave signals to it: it decides how to stop.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s %(levelname)s %(name)s [{config.worker_name}/engine %(process)d] %(message)s",
    )
    deps = build_render_deps(config)
    if config.preload_engine:
        # Loaded before the first segment arrives, so no job waits for a model load.
        deps.engines.get(config.preload_engine)
    try:
        serve(conn, deps, drain)
    finally:
        if deps.prefetch is not None:
            deps.prefetch.close()
        deps.engines.close()
