"""The frame pipeline every render shares: decode a frame range → engine → encoder, with its checks.

Used by a worker for one segment and by `swap` for a whole local video, so both run the same code.
Output can be cut into chunks on a fixed frame grid: each chunk is encoded on its own (starting
with an IDR frame) and handed to `on_chunk` as soon as it is complete — the worker uploads it as a
checkpoint, so a redelivered segment resumes after the last chunk instead of starting again.
Frames an engine returns at another size than the job's (FaceFusion's frame enhancer makes them
larger) are scaled by the encoder from their real size to the job's, as FaceFusion's writer does.
A job's timeline (fusionfleet.jobs.timeline) says how many output frames show each target frame: one,
or more or none where the job's output rate differs from the target's, as FaceFusion's writer repeats
and drops them; the chunks are counted in output frames.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fusionfleet.errors import SegmentFailed
from fusionfleet.jobs.encoding import EncoderSettings
from fusionfleet.jobs.timeline import Timeline
from fusionfleet.media.decode import iter_frames
from fusionfleet.media.ffmpeg import encode_segment_argv
from fusionfleet.media.probe import VideoInfo
from fusionfleet.media.reader import RangeReader
from fusionfleet.media.runner import FramePipe
from gpu_worker.engines.base import CarriesState, Engine, EngineJob, Frame, Image, ReportsSelection, StateUnreadable
from gpu_worker.errors import Cancelled, Drained
from gpu_worker.integrity import IntegrityWatch

logger = logging.getLogger(__name__)

# Frames decoded before a range's first frame so trackers and filters start warm; the merged
# video then shows no jump where one segment (or a resumed chunk) hands over to the next.
# A chunk resumed from the engine's saved state needs none.
LEAD_IN_FRAMES = 12


@dataclass(frozen=True)
class RangeStats:
    frames: int
    engine_s: float
    wall_s: float


def chunk_grid(
    start: int, end: int, chunk_frames: int | None, timeline: Timeline | None = None
) -> list[tuple[int, int]]:
    """[start, end) cut every `chunk_frames` frames from `start` (one chunk when None). Pure.

    A chunk the timeline shows no frame of (a lower output rate drops frames) joins the one before
    it (the first such, the one after): every chunk is a video of at least one frame.
    """
    if chunk_frames is None or chunk_frames <= 0:
        return [(start, end)]
    grid = [(first, min(first + chunk_frames, end)) for first in range(start, end, chunk_frames)]
    if timeline is None:
        return grid
    joined: list[tuple[int, int]] = []
    for first, last in grid:
        if joined and (timeline.output_frames(first, last) == 0 or timeline.output_frames(*joined[-1]) == 0):
            joined[-1] = (joined[-1][0], last)
        else:
            joined.append((first, last))
    return joined


def shown_frames(timeline: Timeline | None, first: int, end: int) -> int:
    """Output frames made from target frames [first, end): one each without a timeline."""
    return end - first if timeline is None else timeline.output_frames(first, end)


OnChunk = Callable[[Path, int, int], None]
OnState = Callable[[int, int, bytes], None]


@dataclass(frozen=True)
class Carry:
    """Temporal state across an interruption: `engine` is the one whose state is saved (unwrapped
    from any fault injector); `resume` its state before the range's first frame (None: lead-in);
    `on_state` is given the state after each chunk, before `on_chunk` sees the chunk."""

    engine: CarriesState
    on_state: OnState
    resume: bytes | None = None


def _resume(carry: Carry | None, what: str) -> bool:
    """Load the saved state into the engine; False when there is none to continue from (lead-in)."""
    if carry is None or carry.resume is None:
        return False
    try:
        carry.engine.load_state(carry.resume)
    except StateUnreadable as error:
        logger.warning("%s: %s; resuming with the lead-in", what, error)
        return False
    return True


def render_range(
    engine: Engine,
    job: EngineJob,
    reader: RangeReader,
    video: VideoInfo,
    chunks: list[tuple[int, int]],
    settings: EncoderSettings,
    workdir: Path,
    cancel: threading.Event,
    what: str,
    on_chunk: OnChunk | None = None,
    on_frame: Callable[[int], None] | None = None,
    drain: threading.Event | None = None,
    timeout_s: float = 3600,
    decode_threads: int = 0,
    on_preview: Callable[[Image], None] | None = None,
    carry: Carry | None = None,
    lead_out: int = 0,
    timeline: Timeline | None = None,
) -> RangeStats:
    """Render consecutive `chunks` [(first, end), …] of `video` into workdir/<first>-<end>.mp4 files.

    `lead_out`: frames after the range that the engine sees but that are not emitted (FaceFusion's
    tracker looks that far ahead), as the lead-in frames before it. `timeline`: how many output frames
    show each emitted frame, and the number FaceFusion's processors give it (None: once, its own).
    """
    began = time.monotonic()
    start, end = chunks[0][0], chunks[-1][1]
    first = start if _resume(carry, what) else max(0, start - LEAD_IN_FRAMES)
    last_decoded = min(video.frame_count, end + lead_out)
    emits: list[int | None] = []  # each frame given to the engine: its index when emitted
    watch = IntegrityWatch()

    def frames() -> Iterator[Frame]:
        for index, image in iter_frames(reader, video, first, last_decoded, what, decode_threads):
            if cancel.is_set():
                raise Cancelled(f"{what}: cancelled at frame {index}")
            emit = start <= index < end
            emits.append(index if emit else None)
            if emit:
                watch.saw_input(image, index)
            number = timeline.frame_number(index) if timeline is not None else index
            yield Frame(index=index, image=image, emit=emit, number=number)

    engine_s = 0.0
    produced = 0
    written = 0
    last: Image | None = None
    outputs = engine.render(job, frames())
    sizes: list[tuple[int, ...]] = []  # the engine's frame shape, one for the whole range

    def emitted() -> Iterator[tuple[int, Image]]:
        """The engine's emitted frames with their index; the lead-in and lead-out ones are counted and dropped."""
        nonlocal engine_s, produced
        while True:
            tick = time.monotonic()
            image = next(outputs, None)
            engine_s += time.monotonic() - tick
            if image is None:
                return
            if produced >= len(emits):
                raise SegmentFailed(f"{what}: engine {engine.name} returned more frames than it was given")
            produced += 1
            index = emits[produced - 1]
            if index is not None:
                watch.saw_output(image)
                yield index, _checked_shape(image, sizes, what, engine.name)

    images = emitted()
    for chunk_first, chunk_end in chunks:
        path = workdir / f"{chunk_first:07d}-{chunk_end:07d}.mp4"
        with contextlib.ExitStack() as stack:
            pipe: FramePipe | None = None
            for _ in range(chunk_end - chunk_first):  # every target frame of the chunk, in order
                item = next(images, None)
                if item is None:
                    raise SegmentFailed(f"{what}: engine {engine.name} returned {produced} frames for {len(emits)}")
                index, image = item
                copies = 1 if timeline is None else timeline.shown(index)
                if copies and pipe is None:
                    # The encoder takes the frames at their real size and scales them to the job's.
                    height, width = image.shape[:2]
                    argv = encode_segment_argv(width, height, settings, path)
                    pipe = stack.enter_context(FramePipe(argv, what, timeout_s=timeout_s))
                for _ in range(copies):
                    assert pipe is not None
                    pipe.write(image)
                    written += 1
                    if on_frame:
                        on_frame(written)
                last = image if copies else last
            if pipe is None:
                raise SegmentFailed(f"{what}: no output frame shows frames {chunk_first}-{chunk_end - 1}")
        if carry is not None:
            # The engine has yielded the chunk's last frame and not yet pulled the next one.
            carry.on_state(chunk_first, chunk_end, carry.engine.save_state())
        if on_chunk:
            on_chunk(path, chunk_first, chunk_end)
        if on_preview is not None and last is not None:
            on_preview(last)
        if drain is not None and drain.is_set() and chunk_end < end:
            raise Drained(chunk_end)
    if next(images, None) is not None:
        raise SegmentFailed(f"{what}: engine {engine.name} returned more frames than it was given")
    watch.check(what, engine.selected_frames() if isinstance(engine, ReportsSelection) else None)
    return RangeStats(frames=written, engine_s=engine_s, wall_s=time.monotonic() - began)


def _checked_shape(image: Image, sizes: list[tuple[int, ...]], what: str, engine: str) -> Image:
    """A BGR frame of the size the engine's first one had (any size: the encoder scales it)."""
    if image.ndim != 3 or image.shape[2] != 3 or min(image.shape[:2]) < 1:
        raise SegmentFailed(f"{what}: engine {engine} returned a {image.shape} frame, not a BGR picture")
    if not sizes:
        sizes.append(image.shape)
    elif image.shape != sizes[0]:
        raise SegmentFailed(f"{what}: engine {engine} returned a {image.shape} frame after {sizes[0]} ones")
    return image
