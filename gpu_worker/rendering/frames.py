"""The frame pipeline every render shares: decode a frame range → engine → encoder, with its checks.

Used by a worker for one segment and by `swap` for a whole local video, so both run the same code.
Output can be cut into chunks on a fixed frame grid: each chunk is encoded on its own (starting
with an IDR frame) and handed to `on_chunk` as soon as it is complete — the worker uploads it as a
checkpoint, so a redelivered segment resumes after the last chunk instead of starting again.

The stages overlap: the decoder runs ahead of the engine and the encoder and uploader behind it,
each in a thread of its own joined by bounded hand-offs, so the engine waits only for its first
frame (and for a stage slower than itself). Frames pass between the threads by reference, never
copied; memory is bounded by the hand-offs' byte budgets (docs/occupancy.md states it per size).

Frames an engine returns at another size than the job's (FaceFusion's frame enhancer makes them
larger) are scaled by the encoder from their real size to the job's, as FaceFusion's writer does.
A job's timeline (fusionfleet.jobs.timeline) says how many output frames show each target frame: one,
or more or none where the job's output rate differs from the target's, as FaceFusion's writer repeats
and drops them; the chunks are counted in output frames.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fusionfleet.errors import SegmentFailed
from fusionfleet.jobs.encoding import EncoderSettings
from fusionfleet.jobs.timeline import Timeline
from fusionfleet.media.probe import VideoInfo
from fusionfleet.media.ranges import RangeReader
from gpu_worker.engines.base import CarriesState, Engine, EngineJob, Frame, Image, ReportsSelection, StateUnreadable
from gpu_worker.errors import Cancelled, Drained
from gpu_worker.rendering.chunk_encoder import ChunkEncoder, ChunkEnd, OnChunk, OnState
from gpu_worker.rendering.decode_ahead import DecodeAhead
from gpu_worker.rendering.handoff import PipelineStop
from gpu_worker.rendering.integrity import IntegrityWatch
from gpu_worker.rendering.stage_clock import StageClock

logger = logging.getLogger(__name__)

# Frames decoded before a range's first frame so trackers and filters start warm; the merged
# video then shows no jump where one segment (or a resumed chunk) hands over to the next.
# A chunk resumed from the engine's saved state needs none.
LEAD_IN_FRAMES = 12


@dataclass(frozen=True)
class RangeStats:
    frames: int
    engine_s: float  # the engine's own time, not the frames it waited for (stages["engine"])
    wall_s: float
    stages: dict[str, float] = field(default_factory=dict)  # seconds per stage (gpu_worker.rendering.stage_clock)


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


@dataclass
class PendingRange:
    """A range whose engine part is done while its encoder may still encode and save the last chunks.

    The engine is free once this exists: a worker renders its next segment while `settle` waits here
    (gpu_worker.delivery.lookahead finishes the segment in the background), so the encoder's tail
    overlaps the next segment's engine instead of keeping it waiting.
    """

    engine_s: float
    began: float
    engine_done_at: float
    what: str
    encoder: ChunkEncoder
    clock: StageClock
    watch: IntegrityWatch
    selected: Any  # the engine's selection of frames, read before the engine moves on (ReportsSelection)

    def settle(self) -> RangeStats:
        """Wait until every chunk is encoded and saved; the range's stats, or its encoder's failure."""
        try:
            self.encoder.finish()
        except BaseException:
            self.encoder.abort()
            raise
        self.clock.add("tail", time.monotonic() - self.engine_done_at)
        self.watch.check(self.what, self.selected)
        return RangeStats(
            frames=self.encoder.written,
            engine_s=self.engine_s,
            wall_s=time.monotonic() - self.began,
            stages=self.clock.snapshot(),
        )


def start_range(
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
    ahead: DecodeAhead | None = None,
    hwaccel: Any = None,
    lead_out: int = 0,
    timeline: Timeline | None = None,
) -> PendingRange:
    """Render consecutive `chunks` [(first, end), …] of `video` into workdir/<first>-<end>.mp4 files.

    Decode runs ahead of the engine and encode and upload behind it, each in a thread of its own
    (gpu_worker.rendering.decode_ahead, gpu_worker.rendering.chunk_encoder); this thread runs the engine.
    `ahead`: a decoder started earlier (the next segment's, gpu_worker.rendering.prefetch), used when it decodes
    the frames wanted.
    `lead_out`: frames after the range that the engine sees but that are not emitted (FaceFusion's
    tracker looks that far ahead), as the lead-in frames before it. `timeline`: how many output frames
    show each emitted frame, and the number FaceFusion's processors give it (None: once, its own).
    """
    began = time.monotonic()
    clock = StageClock()
    start, end = chunks[0][0], chunks[-1][1]
    first = start if _resume(carry, what) else max(0, start - LEAD_IN_FRAMES)
    last_decoded = min(video.frame_count, end + lead_out)
    if ahead is not None and (ahead.reader is not reader or (ahead.first, ahead.end) != (first, last_decoded)):
        logger.info("%s: the decoder started early read frames %s-%s, not %s-%s; decoding anew",
                    what, ahead.first, ahead.end, first, last_decoded)  # fmt: skip
        ahead.close()
        ahead = None
    decoder = ahead or DecodeAhead(reader, video, first, last_decoded, what, decode_threads, hwaccel)
    watch = IntegrityWatch()
    stop = PipelineStop()
    encoder: ChunkEncoder | None = None  # started at the engine's first frame: its size is the encoder's input

    def start_encoder(image: Image) -> ChunkEncoder:
        height, width = image.shape[:2]
        return ChunkEncoder(
            (width, height), settings, workdir, chunks, what, clock, stop, watch, timeout_s=timeout_s,
            on_chunk=on_chunk, on_state=carry.on_state if carry is not None else None, on_preview=on_preview,
            on_frame=on_frame,
        ).start()  # fmt: skip

    emits: list[int | None] = []  # each frame handed to the engine: its index when emitted
    waited_here = [0.0]  # what the engine's own thread waited for input, inside its render step
    engine_thread = threading.get_ident()

    def frames() -> Iterator[Frame]:
        for index, image, waited in decoder.frames(clock):
            if threading.get_ident() == engine_thread:
                waited_here[0] += waited
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
    sizes: list[tuple[int, ...]] = []  # the engine's frame shape, one for the whole range

    def emitted(outputs: Iterator[Image]) -> Iterator[tuple[int, Image]]:
        """The engine's emitted frames with their index; the lead-in and lead-out ones are counted and dropped."""
        nonlocal engine_s, produced
        while True:
            tick, before = time.perf_counter(), waited_here[0]
            image = next(outputs, None)
            engine_s += time.perf_counter() - tick - (waited_here[0] - before)
            if image is None:
                return
            if produced >= len(emits):
                raise SegmentFailed(f"{what}: engine {engine.name} returned more frames than it was given")
            produced += 1
            index = emits[produced - 1]
            if index is not None:
                yield index, _checked_shape(image, sizes, what, engine.name, 4 if settings.alpha else 3)

    last_frame_at = began
    outputs: Generator[Image, None, None] | None = None
    drained_at: int | None = None
    try:
        decoder.start()
        outputs = _generator(engine.render(job, frames()))
        images = emitted(outputs)
        for chunk_first, chunk_end in chunks:
            for _ in range(chunk_end - chunk_first):  # every target frame of the chunk, in order
                item = next(images, None)
                if item is None:
                    raise SegmentFailed(f"{what}: engine {engine.name} returned {produced} frames for {len(emits)}")
                index, image = item
                encoder = encoder or start_encoder(image)
                encoder.put_frame(image, 1 if timeline is None else timeline.shown(index))
            assert encoder is not None  # a chunk has at least one frame
            # The engine has yielded the chunk's last frame and not yet pulled the next one.
            state = carry.engine.save_state() if carry is not None else None
            encoder.end_chunk(ChunkEnd(chunk_first, chunk_end, state))
            if drain is not None and drain.is_set() and chunk_end < end:
                drained_at = chunk_end  # stopped after the chunk in hand
                break
        if drained_at is None and next(images, None) is not None:
            raise SegmentFailed(f"{what}: engine {engine.name} returned more frames than it was given")
        last_frame_at = time.monotonic()
        assert encoder is not None
        if drained_at is not None:
            encoder.finish()  # every chunk handed over is encoded and saved before the release
    except BaseException as error:
        if encoder is not None:
            _save_ended_chunks(encoder, stop, error, what)
        if outputs is not None:
            outputs.close()  # an engine left inside a segment ends it now, not when collected
        raise
    finally:
        decoder.close()
    if drained_at is not None:
        outputs.close()
        raise Drained(drained_at)
    clock.add("engine", engine_s)
    decoder.account(clock)
    selected = engine.selected_frames() if isinstance(engine, ReportsSelection) else None
    return PendingRange(engine_s, began, last_frame_at, what, encoder, clock, watch, selected)


def _save_ended_chunks(encoder: ChunkEncoder, stop: PipelineStop, error: BaseException, what: str) -> None:
    """After a failure: the chunks the engine finished are still encoded and saved (a later attempt resumes
    after them, as when frames went one by one), unless the encoder itself failed or the render is abandoned."""
    if stop.is_set() or isinstance(error, Cancelled | KeyboardInterrupt | SystemExit):
        encoder.abort()
        return
    try:
        encoder.finish()
    except BaseException:
        logger.warning("%s: the chunks finished before the failure were not all saved", what, exc_info=True)
        encoder.abort()


def _generator(images: Iterator[Image]) -> Generator[Image, None, None]:
    """The engine's outputs as a generator (one that can be closed), whatever iterator it returned."""
    if isinstance(images, Generator):
        return images
    return (image for image in images)


def _checked_shape(image: Image, sizes: list[tuple[int, ...]], what: str, engine: str, channels: int = 3) -> Image:
    """A BGR frame (BGRA where the job keeps alpha: `channels` 4) of the size the engine's first one had (any
    size: the encoder scales it)."""
    if image.ndim != 3 or image.shape[2] != channels or min(image.shape[:2]) < 1:
        kind = "BGRA" if channels == 4 else "BGR"
        raise SegmentFailed(f"{what}: engine {engine} returned a {image.shape} frame, not a {kind} picture")
    if not sizes:
        sizes.append(image.shape)
    elif image.shape != sizes[0]:
        raise SegmentFailed(f"{what}: engine {engine} returned a {image.shape} frame after {sizes[0]} ones")
    return image
