"""The engine runs in a child process the worker supervises.

A crashed, hung or leaking engine then costs one attempt, not the worker: the child is killed when
it overruns the segment's wall-clock limit (derived from its frame count), replaced when it dies,
and recycled after a number of segments or when its memory grows past a bound. The worker keeps
heartbeating its message meanwhile; a SIGTERM asks the child to stop after its current chunk.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fusionfleet.facefusion.content_analysis import ContentVerdict
from fusionfleet.jobs.timeouts import TimeoutPolicy
from fusionfleet.messages import AnalysisTask, RenderTask, SegmentResult
from gpu_worker.attempt import Attempt
from gpu_worker.config import HostConfig
from gpu_worker.errors import Cancelled, EngineFailure, GivenBack
from gpu_worker.hosting import engine_child
from gpu_worker.hosting.channel import EngineChannel
from gpu_worker.hosting.engine_child import (
    Analysed,
    AnalyseRequest,
    Checkpointed,
    Failed,
    PrefetchRequest,
    Rendered,
    RenderRequest,
    Reply,
    StopRequest,
)
from gpu_worker.rendering.encoded_segment import Finish, RenderedFrames
from gpu_worker.rendering.stills import engine_frames_of

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HostPolicy:
    max_tasks: int = 100
    max_rss_mb: int = 8192
    max_gpu_mb: int | None = None
    base_timeout_s: float = 120.0
    seconds_per_frame: float = 2.0
    # A job's content analysis reads the whole target: its limit follows the whole job's frames
    # (fusionfleet.jobs.timeouts, which the state machine's clocks for the step are derived from too).
    analysis: TimeoutPolicy = field(default_factory=TimeoutPolicy)

    def timeout_s(self, frames: int) -> float:
        """The wall-clock limit for a segment: generous for its length, finite for a hang. Pure."""
        return self.base_timeout_s + frames * self.seconds_per_frame

    def analysis_timeout_s(self, job_frames: int) -> float:
        """The wall-clock limit for a job's content analysis: the whole target's frames, nothing of a segment's."""
        return self.analysis.analysis_attempt_s(job_frames)


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants: an engine may run its model server as a child (warm FaceFusion)."""
    tree, index = [pid], 0
    while index < len(tree):
        for task in Path(f"/proc/{tree[index]}/task").glob("*/children"):
            with contextlib.suppress(OSError, ValueError):
                tree.extend(int(child) for child in task.read_text().split())
        index += 1
    return tree


def rss_mb(pid: int) -> float:
    """Resident memory of `pid` and its descendants."""
    return sum(_own_rss_mb(member) for member in process_tree(pid))


def _own_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def gpu_mb(pid: int) -> float | None:
    """GPU memory held by `pid` and its descendants, where nvidia-smi exists; None elsewhere."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=False,
        ).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return gpu_memory_of(out, process_tree(pid))


def gpu_memory_of(apps_csv: str, pids: list[int]) -> float:
    """MiB that `pids` hold, from nvidia-smi's `pid, used_memory` lines. Pure."""
    wanted = {str(pid) for pid in pids}
    total = 0.0
    for line in apps_csv.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) == 2 and fields[0] in wanted:
            try:
                total += float(fields[1])
            except ValueError:
                continue
    return total


# With no bound configured, an engine holding more than this share of its GPU's memory is recycled:
# FaceFusion's warm process keeps every session it created ('tolerant'), and the next segment's
# buffers need the rest.
DEFAULT_GPU_SHARE = 0.85


def default_gpu_limit_mb(total_mib: float | None, share: float = DEFAULT_GPU_SHARE) -> int | None:
    """The GPU-memory bound an engine gets when none is configured; None on a host without a GPU. Pure."""
    return None if not total_mib else int(total_mib * share)


def recycle_reason(tasks: int, rss: float, gpu: float | None, policy: HostPolicy) -> str | None:
    """Why the engine process should be replaced now, or None. Pure."""
    if tasks >= policy.max_tasks:
        return f"it rendered {tasks} segments (limit {policy.max_tasks})"
    if rss > policy.max_rss_mb:
        return f"its resident memory is {rss:.0f} MB (limit {policy.max_rss_mb} MB)"
    if gpu is not None and policy.max_gpu_mb is not None and gpu > policy.max_gpu_mb:
        return f"it holds {gpu:.0f} MB of GPU memory (limit {policy.max_gpu_mb} MB)"
    return None


class EngineHost:
    def __init__(
        self, config: HostConfig, policy: HostPolicy, finish: Callable[[RenderedFrames, Attempt], SegmentResult]
    ) -> None:
        self._config = config
        self._policy = policy
        # Joins, checks and uploads rendered frames in the worker's process (render.finish_segment).
        self._finish = finish
        self._context = multiprocessing.get_context("spawn")
        self._drain = self._context.Event()
        self._process: Any = None
        self._channel: EngineChannel | None = None
        self._tasks = 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Start the engine process now rather than on the first segment."""
        if self._process is None or not self._process.is_alive():
            self._start()

    def _start(self) -> None:
        parent, child = self._context.Pipe()
        self._process = self._context.Process(
            target=engine_child.main, args=(child, self._config, self._drain), name="engine", daemon=True
        )
        self._process.start()
        child.close()
        self._channel = EngineChannel(parent)
        self._tasks = 0
        logger.info("engine process %s started", self._process.pid)

    def expect(self, task: RenderTask) -> None:
        """`task` is this worker's next: the engine process starts decoding it while it renders the current one."""
        channel, process = self._channel, self._process
        if channel is None or process is None or not process.is_alive():
            return
        with contextlib.suppress(BrokenPipeError, OSError):
            channel.send(PrefetchRequest(task))

    def _kill(self, why: str) -> None:
        if self._process is not None and self._process.is_alive():
            logger.warning("killing engine process %s: %s", self._process.pid, why)
            self._process.kill()
        if self._process is not None:
            self._process.join(timeout=10)
        if self._channel is not None:
            self._channel.close()
        self._process = None
        self._channel = None

    def render(self, task: RenderTask, attempt: Attempt, cancel: threading.Event, stopping: threading.Event) -> Finish:
        """The segment's frames, rendered in the engine process; the step returned finishes it here."""
        self.start()
        assert self._channel is not None
        channel = self._channel
        self._drain.clear()
        channel.send(RenderRequest(task, attempt))
        what = f"segment {task.segment.index} of {task.job.job_id}"
        limit = self._policy.timeout_s(engine_frames_of(task) if task.job.renders_stills else task.segment.frame_count)
        deadline = time.monotonic() + limit
        try:
            reply = self._wait(cancel, stopping, deadline, limit, what)
        except BaseException:
            self._kill("the attempt was abandoned")
            raise
        self._tasks += 1
        self._maybe_recycle()
        if isinstance(reply, Rendered):
            frames = reply.frames
            if reply.encoding:
                # The engine is free; the finish (which may run beside the next segment) waits for the encoder.
                return lambda: self._finish(self._encoded(channel, frames, limit, what), attempt)
            return lambda: self._finish(frames, attempt)
        if isinstance(reply, Checkpointed):
            raise GivenBack(f"{what}: checkpointed before frame {reply.next_frame}")
        assert isinstance(reply, Failed)
        raise EngineFailure(reply.name, reply.reason, reply.retryable)

    @staticmethod
    def _encoded(channel: EngineChannel, frames: RenderedFrames, limit: float, what: str) -> RenderedFrames:
        """The frames once the engine process says their encoder finished; its failure, or the process's
        end before it said, fails the attempt (retried: the chunks saved so far are kept)."""
        told = channel.encoded(str(frames.workdir), limit)
        if told is None:
            shutil.rmtree(frames.workdir, ignore_errors=True)
            if channel.open:
                raise EngineFailure("EngineTimeout", f"{what}: its encoder did not finish within {limit:.0f} s")
            raise EngineFailure("EngineCrashed", f"{what}: the engine process ended before its chunks were all encoded")
        if told.failure is not None:
            raise EngineFailure(told.failure.name, told.failure.reason, told.failure.retryable)
        return replace(frames, stages=told.stages)

    def analyse(
        self, task: AnalysisTask, attempt: Attempt, cancel: threading.Event, stopping: threading.Event
    ) -> ContentVerdict:
        """The job's content-analysis verdict, made (or read) in the engine process within its own limit."""
        self.start()
        assert self._channel is not None
        self._channel.send(AnalyseRequest(task, attempt))
        what = f"content analysis of {task.job.job_id}"
        limit = self._policy.analysis_timeout_s(task.job.frames.frames)
        try:
            reply = self._wait(cancel, stopping, time.monotonic() + limit, limit, what)
        except BaseException:
            self._kill("the analysis was abandoned")
            raise
        if isinstance(reply, Analysed):
            return reply.verdict
        if isinstance(reply, Failed):
            raise EngineFailure(reply.name, reply.reason, reply.retryable)
        raise EngineFailure("EngineConfused", f"{what}: the engine answered {type(reply).__name__}", True)

    def _wait(
        self, cancel: threading.Event, stopping: threading.Event, deadline: float, limit: float, what: str
    ) -> Reply:
        assert self._channel is not None and self._process is not None
        while True:
            reply = self._channel.reply(0.2)
            if reply is not None:
                return reply
            if not self._process.is_alive():
                code = self._process.exitcode
                self._kill("it died")
                how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                raise EngineFailure("EngineCrashed", f"{what}: the engine process died ({how})")
            if cancel.is_set():
                raise Cancelled(f"{what}: cancelled")
            if stopping.is_set() and not self._drain.is_set():
                logger.info("%s: stop requested, the engine stops after its current chunk", what)
                self._drain.set()
            if time.monotonic() > deadline:
                self._kill(f"no result within {limit:.0f} s")
                raise EngineFailure(
                    "EngineTimeout", f"{what}: no result within {limit:.0f} s (the engine hung or is far too slow)"
                )

    def _maybe_recycle(self) -> None:
        if self._process is None:
            return
        pid = self._process.pid
        why = recycle_reason(self._tasks, rss_mb(pid), gpu_mb(pid), self._policy)
        if why:
            logger.info("recycling engine process %s: %s", pid, why)
            self.close()
            self.start()

    def close(self) -> None:
        if self._channel is not None and self._process is not None and self._process.is_alive():
            with contextlib.suppress(BrokenPipeError, OSError):
                self._channel.send(StopRequest())
            # (it finishes a segment still encoding first, and says so before it exits)
            self._process.join(timeout=30)
        self._kill("closing")
