"""The frame pipeline every render shares: decode a frame range → engine → encoder, with its checks.

Used by a worker for one segment and by `swap` for a whole local video, so both run the same code.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fusionfleet.encoding import EncoderSettings
from fusionfleet.errors import SegmentFailed
from fusionfleet.media.decode import iter_frames
from fusionfleet.media.ffmpeg import encode_segment_argv
from fusionfleet.media.probe import VideoInfo
from fusionfleet.media.reader import RangeReader
from fusionfleet.media.runner import FramePipe
from gpu_worker.engines.base import Engine, EngineJob, Frame

# Frames decoded before a range's first frame so trackers and filters start warm; the merged
# video then shows no jump where one segment hands over to the next.
LEAD_IN_FRAMES = 12


class Cancelled(Exception):
    """The hold on the message was lost (token closed, receipt expired) or a stop came."""


@dataclass(frozen=True)
class RangeStats:
    frames: int
    engine_s: float
    wall_s: float


def render_range(
    engine: Engine,
    job: EngineJob,
    reader: RangeReader,
    video: VideoInfo,
    start: int,
    end: int,
    settings: EncoderSettings,
    output: Path,
    cancel: threading.Event,
    what: str,
    on_frame: Callable[[int], None] | None = None,
    timeout_s: float = 3600,
    decode_threads: int = 0,
) -> RangeStats:
    """Frames [start, end) of `video` through `engine` into `output`, encoded with `settings`."""
    began = time.monotonic()
    width, height = video.display_size
    first = max(0, start - LEAD_IN_FRAMES)
    emits: list[bool] = []

    def frames() -> Iterator[Frame]:
        for index, image in iter_frames(reader, video, first, end, what, decode_threads):
            if cancel.is_set():
                raise Cancelled(f"{what}: cancelled at frame {index}")
            emits.append(index >= start)
            yield Frame(index=index, image=image, emit=index >= start)

    engine_s = 0.0
    produced = 0
    written = 0
    with FramePipe(encode_segment_argv(width, height, settings, output), what, timeout_s=timeout_s) as pipe:
        outputs = engine.render(job, frames())
        while True:
            tick = time.monotonic()
            image = next(outputs, None)
            engine_s += time.monotonic() - tick
            if image is None:
                break
            if produced >= len(emits):
                raise SegmentFailed(f"{what}: engine {engine.name} returned more frames than it was given")
            if image.shape != (height, width, 3):
                raise SegmentFailed(f"{what}: engine {engine.name} returned a {image.shape} frame for {height}×{width}")
            if emits[produced]:
                pipe.write(image)
                written += 1
                if on_frame:
                    on_frame(written)
            produced += 1
        if produced != len(emits):
            raise SegmentFailed(f"{what}: engine {engine.name} returned {produced} frames for {len(emits)}")
    return RangeStats(frames=written, engine_s=engine_s, wall_s=time.monotonic() - began)
