"""The worker's liveness record: what its container's health check reads (`gpu_worker.lifecycle.health`).

A worker hung in the GPU driver keeps its message through its keeper thread (the visibility extended,
the token beaten, the task protected from scale-in), so nothing the keeper does shows the hang. The
record is written by the render loop itself instead: the process that renders (the engine child, or
the worker where it renders inline) says when it starts, when it takes a request and goes idle again,
and, while it renders, each time a frame comes out of the engine. A render whose engine stops giving
frames (a driver hang, an engine deadlocked) leaves the record unchanged, and the health check fails
once it is older than the phase allows; an idle worker waiting for messages is healthy however long
it waits.

The record is one small JSON file (`FUSIONFLEET_LIVENESS_FILE`; none written when unset), replaced
whole (write, then rename) so the check never reads half of one.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class Phase(StrEnum):
    STARTING = "starting"  # loading its engine (models onto the GPU)
    IDLE = "idle"  # waiting for its next request: healthy however long
    RENDERING = "rendering"  # a segment: each frame out of the engine renews the record
    ANALYSING = "analysing"  # a job's content analysis: no frame to count, its own limit


@dataclass(frozen=True)
class LivenessPolicy:
    """How long each busy phase may go without a sign of life before the check fails."""

    # No frame out of the engine for this long: a hang. The slowest honest gap is a segment's first
    # frame (its decoder and sources started, an engine warming a model for new options): minutes, not ten.
    stall_s: float = 600.0
    # Loading the engine at start or after a recycle (FaceFusion's models onto the GPU).
    start_s: float = 900.0
    # A content analysis reads the whole target without frames out of the engine: its record carries
    # its own allowance, this one where it names none.
    analysis_s: float = 3600.0


@dataclass(frozen=True)
class Pulse:
    phase: Phase
    at: float  # when the phase began, or (rendering) the last frame came out of the engine
    pid: int = 0
    allow_s: float | None = None  # an allowance of its own (an analysis's limit); None: the policy's


@dataclass(frozen=True)
class Verdict:
    healthy: bool
    why: str


def judge(pulse: Pulse | None, now: float, policy: LivenessPolicy) -> Verdict:
    """Whether the worker is alive, from its last pulse. Pure."""
    if pulse is None:
        return Verdict(False, "no liveness record: the worker never wrote one")
    age = max(0.0, now - pulse.at)
    if pulse.phase is Phase.IDLE:
        return Verdict(True, f"idle for {age:.0f} s, waiting for work")
    allowed = {
        Phase.STARTING: policy.start_s,
        Phase.RENDERING: policy.stall_s,
        Phase.ANALYSING: policy.analysis_s,
    }[pulse.phase]
    if pulse.allow_s is not None:
        allowed = pulse.allow_s
    what = {
        Phase.STARTING: "loading its engine",
        Phase.RENDERING: "rendering, last frame out of the engine",
        Phase.ANALYSING: "analysing a job",
    }[pulse.phase]
    if age > allowed:
        return Verdict(False, f"{what} {age:.0f} s ago, more than the {allowed:.0f} s allowed: hung (pid {pulse.pid})")
    return Verdict(True, f"{what} {age:.0f} s ago (allowed {allowed:.0f} s)")


def parse(text: str) -> Pulse | None:
    """A pulse from the record's text; None for anything else (a record cut short reads as none). Pure."""
    try:
        raw = json.loads(text)
        allow = raw.get("allow_s")
        return Pulse(Phase(raw["phase"]), float(raw["at"]), int(raw.get("pid", 0)),
                     None if allow is None else float(allow))  # fmt: skip
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def read(path: Path) -> Pulse | None:
    try:
        return parse(path.read_text())
    except OSError:
        return None


class Liveness:
    """Writes the record. `advanced` is called for every frame: it writes at most once per `every_s`."""

    def __init__(self, path: Path, every_s: float = 1.0, clock: Callable[[], float] = time.time) -> None:
        self._path = path
        self._every_s = every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._phase = Phase.STARTING
        self._written = float("-inf")

    def starting(self) -> None:
        self._write(Phase.STARTING)

    def idle(self) -> None:
        self._write(Phase.IDLE)

    def rendering(self) -> None:
        self._write(Phase.RENDERING)

    def analysing(self, allow_s: float | None = None) -> None:
        self._write(Phase.ANALYSING, allow_s)

    def advanced(self, _frame: int = 0) -> None:
        """A frame came out of the engine (the chunk encoder's `on_frame`, on its thread). Checked and written
        under one lock: a frame checked before the loop went idle and written after would leave an idle
        worker reading "rendering", hung once the allowance passed (a make test run caught it)."""
        with self._lock:
            if self._phase is Phase.RENDERING and self._clock() - self._written >= self._every_s:
                self._write_held(Phase.RENDERING)

    def _write(self, phase: Phase, allow_s: float | None = None) -> None:
        with self._lock:
            self._write_held(phase, allow_s)

    def _write_held(self, phase: Phase, allow_s: float | None = None) -> None:
        now = self._clock()
        body = {"phase": phase.value, "at": now, "pid": os.getpid(), "allow_s": allow_s}
        temporary = self._path.with_name(f".{self._path.name}.{os.getpid()}.tmp")
        # A full disk or a vanished folder must not fail a render: the check then sees the record age.
        with contextlib.suppress(OSError):
            self._path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps(body))
            os.replace(temporary, self._path)
        self._phase, self._written = phase, now
