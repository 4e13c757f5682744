"""The encode and upload stages: the engine's frames encoded into chunk files behind it, each finished
chunk checkpointed in a thread of its own.

The engine hands over its emitted frames and, after each chunk's last frame, the chunk's end (with
the engine's state at that point); it waits only when the bounded hand-off is full. The encoder writes
frames to the chunk's ffmpeg and starts the next chunk's ffmpeg as soon as one chunk's frames are in;
the uploader waits for each chunk's ffmpeg to finish and then saves the chunk (its state first, so a
saved chunk never lacks its state) and the preview, in chunk order. The encoder's argv is the job's
(`encode_segment_argv`): the same bytes as a render frame by frame.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fusionfleet.jobs.encoding import EncoderSettings
from fusionfleet.media.ffmpeg import encode_segment_argv
from fusionfleet.media.runner import FramePipe
from gpu_worker.engines.base import Image
from gpu_worker.rendering.handoff import Handoff, PipelineStop, Stopped, queue_frames
from gpu_worker.rendering.integrity import IntegrityWatch
from gpu_worker.rendering.stage_clock import StageClock

logger = logging.getLogger(__name__)

# Frames held between the engine and the encoder: at most this many bytes, at most MOST_BEHIND frames.
BEHIND_BYTES = 128 * 1024 * 1024
MOST_BEHIND = 16
# Finished chunks whose ffmpeg may still be flushing while the next chunk encodes.
CHUNKS_IN_FLIGHT = 2

OnChunk = Callable[[Path, int, int], None]
OnState = Callable[[int, int, bytes], None]


@dataclass(frozen=True)
class ChunkEnd:
    """The engine has handed over the last frame of chunk [first, end); `state`: its state then (None: none saved)."""

    first: int
    end: int
    state: bytes | None


@dataclass(frozen=True)
class _Shown:
    """One of the engine's frames and how many output frames show it (the job's timeline)."""

    image: Image
    copies: int


@dataclass(frozen=True)
class _Done:
    """No more frames: the engine finished, or stopped after a chunk."""


@dataclass(frozen=True)
class _Finished:
    pipe: FramePipe
    path: Path
    chunk: ChunkEnd
    last: Image | None


def chunk_path(workdir: Path, first: int, end: int) -> Path:
    return workdir / f"{first:07d}-{end:07d}.mp4"


def frames_behind(width: int, height: int) -> int:
    """How many of the engine's frames may wait for the encoder at this size. Pure."""
    return queue_frames(width * height * 3, BEHIND_BYTES, MOST_BEHIND)


class ChunkEncoder:
    """Encodes and saves chunks behind the engine; `finish()` waits for both stages and raises their failure."""

    def __init__(
        self,
        size: tuple[int, int],
        settings: EncoderSettings,
        workdir: Path,
        chunks: list[tuple[int, int]],
        what: str,
        clock: StageClock,
        stop: PipelineStop,
        watch: IntegrityWatch,
        *,
        timeout_s: float,
        on_chunk: OnChunk | None = None,
        on_state: OnState | None = None,
        on_preview: Callable[[Image], None] | None = None,
        on_frame: Callable[[int], None] | None = None,
    ) -> None:
        self._size = size
        self._settings = settings
        self._workdir = workdir
        self._chunks = list(chunks)
        self._what = what
        self._clock = clock
        self._stop = stop
        self._watch = watch
        self._timeout_s = timeout_s
        self._on_chunk = on_chunk
        self._on_state = on_state
        self._on_preview = on_preview
        self._on_frame = on_frame
        self._frames: Handoff[_Shown | ChunkEnd | _Done] = Handoff(frames_behind(*size), stop)
        self._finished: Handoff[_Finished | _Done] = Handoff(CHUNKS_IN_FLIGHT, stop)
        self._pipes: set[FramePipe] = set()
        self._pipes_lock = threading.Lock()
        self._encoder = threading.Thread(target=self._guarded, args=(self._encode,), name="encode", daemon=True)
        self._uploader = threading.Thread(target=self._guarded, args=(self._upload,), name="upload", daemon=True)
        self.written = 0

    @property
    def capacity(self) -> int:
        return self._frames.capacity

    def start(self) -> ChunkEncoder:
        self._encoder.start()
        self._uploader.start()
        return self

    # ---------------------------------------------------------------- the engine's side
    def put_frame(self, image: Image, copies: int = 1) -> None:
        """The engine's next emitted frame, shown `copies` times in the output (0: dropped, a lower rate)."""
        self._hand(_Shown(image, copies))

    def end_chunk(self, chunk: ChunkEnd) -> None:
        self._hand(chunk)

    def _hand(self, item: _Shown | ChunkEnd | _Done) -> None:
        try:
            waited, moved = self._frames.put(item)
        except Stopped:
            self._stop.raise_failure()
            raise
        self._clock.add("engine_waits_output", waited)
        self._clock.add("transfer", moved)

    def finish(self) -> None:
        """No more frames: wait until every handed chunk is encoded and saved; raise a stage's failure."""
        self._hand(_Done())
        for thread in (self._encoder, self._uploader):
            thread.join()
        self._stop.raise_failure()

    def abort(self) -> None:
        """Stop both stages and kill any ffmpeg still running (the render failed or was abandoned)."""
        self._stop.stop()
        with self._pipes_lock:
            pipes = list(self._pipes)
        for pipe in pipes:
            pipe.abort()
        for thread in (self._encoder, self._uploader):
            if thread.is_alive():
                thread.join(timeout=30)

    # ---------------------------------------------------------------- the stages
    def _guarded(self, stage: Callable[[], None]) -> None:
        try:
            stage()
        except Stopped:
            return
        except BaseException as error:
            self._stop.fail(error)

    def _open(self, first: int, end: int) -> tuple[FramePipe, Path]:
        path = chunk_path(self._workdir, first, end)
        width, height = self._size
        with self._clock.timed("encode"):
            pipe = FramePipe(encode_segment_argv(width, height, self._settings, path), self._what, self._timeout_s)
        with self._pipes_lock:
            self._pipes.add(pipe)
        return pipe, path

    def _encode(self) -> None:
        last: Image | None = None
        for first, end in self._chunks:
            # Started before its first frame arrives: ffmpeg's start-up hides behind the engine.
            pipe, path = self._open(first, end)
            while True:
                item, _, _ = self._frames.get()
                if isinstance(item, _Done):
                    # The engine stopped before this chunk (a drain): its ffmpeg never got a frame.
                    self._drop(pipe)
                    self._finished.put(_Done())
                    return
                if isinstance(item, ChunkEnd):
                    if (item.first, item.end) != (first, end):
                        raise RuntimeError(f"chunk {item.first}-{item.end} ended while encoding {first}-{end}")
                    self._finished.put(_Finished(pipe, path, item, last))
                    break
                self._watch.saw_output(item.image)  # once per engine frame: the watch pairs them with its inputs
                for _ in range(item.copies):
                    with self._clock.timed("encode"):
                        pipe.write(item.image)
                    self.written += 1
                    if self._on_frame is not None:
                        self._on_frame(self.written)
                last = item.image if item.copies else last
        item, _, _ = self._frames.get()
        if not isinstance(item, _Done):
            raise RuntimeError("the engine handed over frames past the last chunk")
        self._finished.put(_Done())

    def _upload(self) -> None:
        while True:
            item, _, _ = self._finished.get()
            if isinstance(item, _Done):
                return
            with self._clock.timed("encode"):
                item.pipe.close()  # ffmpeg encodes what it still holds and writes the file
            self._forget(item.pipe)
            chunk = item.chunk
            with self._clock.timed("upload"):
                if self._on_state is not None and chunk.state is not None:
                    self._on_state(chunk.first, chunk.end, chunk.state)
                if self._on_chunk is not None:
                    self._on_chunk(item.path, chunk.first, chunk.end)
                if self._on_preview is not None and item.last is not None:
                    self._on_preview(item.last)

    def _drop(self, pipe: FramePipe) -> None:
        pipe.abort()
        self._forget(pipe)

    def _forget(self, pipe: FramePipe) -> None:
        with self._pipes_lock:
            self._pipes.discard(pipe)
