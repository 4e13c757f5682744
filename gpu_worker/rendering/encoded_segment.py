"""A segment's frames, rendered and encoded but not yet joined, checked or uploaded.

What the engine's part of a segment hands to the rest (render.finish_segment), across the engine
process's pipe: once it exists the engine is free for the next segment. It exists from the engine's
last frame on; where its encoder was still finishing then (render.EngineDone), the finish waits for
that first (the engine process's `Encoded`, gpu_worker.hosting.engine_child).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fusionfleet.messages import RenderTask, SegmentResult

# The rest of a segment once its frames are encoded: join, check, upload, commit (see finish_segment).
Finish = Callable[[], SegmentResult]


@dataclass(frozen=True)
class RenderedFrames:
    """A segment's frames, encoded into chunk files in `workdir`: what finish_segment joins and uploads.

    Plain values, so it crosses the engine process's pipe; the engine is free again once it exists.
    """

    task: RenderTask
    workdir: Path
    grid: tuple[tuple[int, int], ...]
    resumed_from: int
    frames_rendered: int
    engine_s: float
    started_at: float
    rendered_at: float
    bytes_read: int
    stages: tuple[tuple[str, float], ...] = ()  # seconds per stage of the render (gpu_worker.rendering.stage_clock)
    suffix: str = "mp4"  # the chunk files' kind: "png" for a still (an image target, a test render's frame)
