"""Where a segment's time goes, stage by stage, timed where each stage runs.

The segment's stages run in threads of their own (gpu_worker/rendering/frames.py): each adds the seconds it was
busy, or waited, under its own name, so the engine's occupancy is measured directly rather than left
as the remainder of the wall clock. A stage's seconds are its own thread's: stages overlap, so they add
up to more than the wall time when the pipeline works.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

# Every stage a segment reports, in the order a frame meets them. Waits are named for who waits on whom.
STAGES = (
    "read",  # the decoder reading the target's bytes from storage
    "decode",  # decoding and converting frames to BGR (the decoder's busy time less its reads)
    "transfer",  # frames handed between stages (queue hand-offs that did not wait)
    "engine",  # the engine's own time: in its render step, less the frames it waited for and their hand-off
    "engine_waits_input",  # the engine waiting for a decoded frame (the decoder behind)
    "engine_waits_output",  # the engine waiting for room behind it (the encoder behind)
    "encode",  # writing frames to the encoder and waiting for it to finish each chunk
    "upload",  # each chunk's checkpoint (state and chunk) and the preview, uploaded
    "first_frame",  # from the render's start until the engine holds its first frame
    "tail",  # from the engine's last frame until the last chunk is uploaded
)


class StageClock:
    """Seconds per stage, added from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds = dict.fromkeys(STAGES, 0.0)

    def add(self, stage: str, seconds: float) -> None:
        if stage not in self._seconds:
            raise KeyError(f"unknown stage {stage!r}")
        with self._lock:
            self._seconds[stage] += seconds

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.add(stage, time.perf_counter() - began)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return {stage: round(seconds, 4) for stage, seconds in self._seconds.items()}


def occupancy(stages: dict[str, float], wall_s: float) -> float:
    """The engine's own time as a share of the wall time. Pure."""
    return stages.get("engine", 0.0) / wall_s if wall_s > 0 else 0.0
