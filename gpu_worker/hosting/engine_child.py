"""The engine process: the child side of the engine host.

It builds its own render dependencies (clients, engines) once, then renders one segment's frames per
request until it is told to stop; the worker joins, checks and uploads them (render.finish_segment),
so this process is free for the next segment meanwhile. It answers as soon as the engine has made a
segment's last frame: the encoder's tail goes on in a thread here, beside the next segment's engine,
and an `Encoded` message says when that segment's chunks are all on disk. Requests and replies are small values sent
over a multiprocessing pipe; the task arrives parsed (a RenderTask pickles), so a task is parsed once,
by the worker loop. A job's content analysis (its own step) runs here too, with the same engine.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import queue
import signal
import threading
from collections.abc import Callable
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
from gpu_worker.rendering.render import EngineDone, RenderDeps, build_render_deps, busy, job_audio, start_frames

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
    # The engine is done and its encoder still finishing the last chunks: an `Encoded` for this
    # work folder follows, and the worker waits for it before joining them.
    encoding: bool = False


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


@dataclass(frozen=True)
class Encoded:
    """The encoder of the segment rendered in `workdir` has finished: every chunk is on disk and `stages`
    are the render's, complete; or `failure` says why not (nothing of it is kept)."""

    workdir: str
    stages: tuple[tuple[str, float], ...] = ()
    failure: Failed | None = None


Request = RenderRequest | PrefetchRequest | AnalyseRequest | StopRequest
Reply = Rendered | Analysed | Checkpointed | Failed


def failed(error: Exception) -> Failed:
    name, reason = describe(error)
    return Failed(name, reason, retryable(error))


def answer(request: RenderRequest | AnalyseRequest, deps: RenderDeps, drain: Any) -> tuple[Reply, EngineDone | None]:
    """Render one requested segment (or analyse a job): the reply, and a segment whose encoder is still
    finishing; every outcome becomes a reply, none escapes as an exception."""
    never = threading.Event()  # the parent cancels by killing this process
    try:
        if isinstance(request, AnalyseRequest):
            job = request.task.job
            verdict = analyse_job(
                deps.storage, deps.engines, job, deps.cpu_threads, deps.worker_id, lambda: job_audio(deps, job)
            )  # (the audio is fetched only for a lip-sync job's voice)
            return Analysed(verdict), None
        done = start_frames(request.task, deps, never, request.attempt, drain)
        return Rendered(done.frames, encoding=done.tail is not None), done if done.tail is not None else None
    except Drained as stopped:
        return Checkpointed(stopped.next_frame), None
    except Exception as error:
        return failed(error), None


def settle(done: EngineDone, send: Callable[[Encoded], None]) -> None:
    """Wait for a segment's encoder and tell the worker how it ended."""
    workdir = str(done.frames.workdir)
    try:
        told = Encoded(workdir, done.settle().stages)
    except Exception as error:
        told = Encoded(workdir, failure=failed(error))
    with contextlib.suppress(OSError):  # the worker is gone: nobody waits for it
        send(told)


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
    sending = threading.Lock()  # replies from this thread, `Encoded` from the encoders' threads

    def send(message: Reply | Encoded) -> None:
        with sending:
            conn.send(message)

    settling: list[threading.Thread] = []
    try:
        while True:
            request = inbox.get()
            if request is None or isinstance(request, StopRequest):
                return
            assert isinstance(request, RenderRequest | AnalyseRequest)
            with busy(deps.liveness, analysing=isinstance(request, AnalyseRequest)):
                reply, done = answer(request, deps, drain)
                send(reply)
            settling = [thread for thread in settling if thread.is_alive()]
            if done is not None:
                thread = threading.Thread(target=settle, args=(done, send), name="settle", daemon=True)
                thread.start()
                settling.append(thread)
    finally:
        # A segment still encoding is finished and reported before the process ends (a stop or a recycle).
        for thread in settling:
            thread.join()


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
    if deps.liveness is not None:
        deps.liveness.idle()  # loaded: waiting for requests is healthy however long (lifecycle/liveness.py)
    try:
        serve(conn, deps, drain)
    finally:
        if deps.prefetch is not None:
            deps.prefetch.close()
        deps.engines.close()
