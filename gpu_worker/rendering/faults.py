"""Fault injection for chaos runs and fault tests: crash, fail, hang, slow down or leak on purpose.

Off unless the worker was given a file of rules (FUSIONFLEET_FAULTS_FILE, resolved in
gpu_worker.config); the file is read again for every task, so a running fleet can be given new
faults. A rule:
  {"job": "substring of the job id", "segment": 3, "attempt": 1, "copy": 0, "action": "crash",
   "at_frame": 20, "seconds": 5, "megabytes": 200, "probability": 1.0}
(`copy`: 0 the original, 1 a straggler's backup copy; absent: both).
Actions: crash (the engine process dies), kill-worker (the whole worker dies, as with kill -9),
fail (an exception), hang (stops responding), slow (sleeps `seconds` once), leak (keeps
`megabytes` more memory for each frame from at_frame on). Choices are seeded by job, segment and
attempt, so a run can be repeated.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_worker.engines.base import EngineJob, Frame, Image

logger = logging.getLogger(__name__)

ACTIONS = ("crash", "kill-worker", "fail", "hang", "slow", "leak")
_LEAKED: list[bytearray] = []


class InjectedFailure(RuntimeError):
    pass


@dataclass(frozen=True)
class Fault:
    action: str
    at_frame: int = 0
    seconds: float = 0.0
    megabytes: int = 0


def matching(rules: list[dict[str, Any]], job_id: str, segment: int, attempt: int, copy: int = 0) -> list[Fault]:
    """The faults that apply to this attempt of this segment. Pure (seeded)."""
    faults = []
    for number, rule in enumerate(rules):
        if rule.get("action") not in ACTIONS:
            continue
        if rule.get("job") and str(rule["job"]) not in job_id:
            continue
        if rule.get("segment") is not None and int(rule["segment"]) != segment:
            continue
        if rule.get("attempt") is not None and int(rule["attempt"]) != attempt:
            continue
        if rule.get("copy") is not None and int(rule["copy"]) != copy:
            continue
        chance = float(rule.get("probability", 1.0))
        if chance < 1.0 and random.Random(f"{job_id}:{segment}:{attempt}:{number}").random() >= chance:
            continue
        faults.append(
            Fault(
                str(rule["action"]),
                int(rule.get("at_frame", 0)),
                float(rule.get("seconds", 0.0)),
                int(rule.get("megabytes", 0)),
            )
        )
    return faults


def load(path: Path | None, job_id: str, segment: int, attempt: int, copy: int = 0) -> list[Fault]:
    """The faults in the rules file at `path` (None: fault injection is off) for this attempt."""
    if path is None:
        return []
    try:
        rules = json.loads(path.read_text() or "[]")
    except (OSError, ValueError):
        logger.exception("fault file %s is unreadable; no faults injected", path)
        return []
    faults = matching(rules if isinstance(rules, list) else [], job_id, segment, attempt, copy)
    if faults:
        logger.warning("injecting %s into segment %s of %s (attempt %s)", faults, segment, job_id, attempt)
    return faults


def _apply(fault: Fault) -> None:
    if fault.action == "crash":
        os._exit(70)
    if fault.action == "kill-worker":
        os.kill(os.getppid(), signal.SIGKILL)
        os._exit(137)
    if fault.action == "fail":
        raise InjectedFailure("injected engine failure")
    if fault.action == "hang":
        while True:
            time.sleep(3600)
    if fault.action == "slow":
        time.sleep(fault.seconds)


class FaultyEngine:
    """Wraps an engine; applies faults when the segment reaches their frame."""

    def __init__(self, engine: Any, faults: list[Fault], segment_start: int) -> None:
        self._engine = engine
        self._faults = faults
        self._start = segment_start
        self.name = engine.name

    def prepare(self) -> None:
        self._engine.prepare()

    def validate(self, job: EngineJob) -> None:
        self._engine.validate(job)

    def close(self) -> None:
        self._engine.close()

    def render(self, job: EngineJob, frames: Iterable[Frame]) -> Iterator[Image]:
        return self._engine.render(job, self._inject(frames))  # type: ignore[no-any-return]

    def _inject(self, frames: Iterable[Frame]) -> Iterator[Frame]:
        """Faults fire as the engine pulls the frame they name, whatever it buffers."""
        pending = sorted((f for f in self._faults if f.action != "leak"), key=lambda fault: fault.at_frame)
        leaks = [fault for fault in self._faults if fault.action == "leak"]
        for frame in frames:
            offset = frame.index - self._start
            if frame.emit:
                while pending and offset >= pending[0].at_frame:
                    _apply(pending.pop(0))
                for leak in leaks:
                    if offset >= leak.at_frame:
                        _LEAKED.append(bytearray(leak.megabytes * 1024 * 1024))
            yield frame
