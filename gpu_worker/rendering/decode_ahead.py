"""The decode stage: a range of the target decoded in a thread of its own, ahead of the engine.

Frames wait in a bounded hand-off, so the engine takes each one as soon as it wants it and waits only
for the first; memory stays bounded by the hand-off's byte budget. A decoder can be started before
its segment's render begins (the next segment's, while this one renders: gpu_worker/rendering/prefetch.py) and
is then adopted by the render when it asks for the same frames.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fusionfleet.media.decode import iter_frames
from fusionfleet.media.probe import VideoInfo
from fusionfleet.media.ranges import RangeReader
from gpu_worker.engines.base import Image
from gpu_worker.rendering.handoff import Handoff, PipelineStop, Stopped, queue_frames
from gpu_worker.rendering.stage_clock import StageClock

logger = logging.getLogger(__name__)

# Decoded frames held ahead of the engine: at most this many bytes (about 21 frames of 1080p BGR,
# 5 of 2160p), at most MOST_AHEAD frames (enough to cover a hiccup of the decoder at any size).
AHEAD_BYTES = 128 * 1024 * 1024
MOST_AHEAD = 16


@dataclass(frozen=True)
class _Ended:
    """The decoder reached the range's end."""


@dataclass(frozen=True)
class _Failed:
    error: BaseException


_Item = tuple[int, Image] | _Ended | _Failed


def frames_ahead(video: VideoInfo) -> int:
    """How many decoded frames this video's decoder may hold ahead of the engine. Pure."""
    width, height = video.display_size
    return queue_frames(width * height * 3, AHEAD_BYTES, MOST_AHEAD)


class DecodeAhead:
    """Frames [first, end) of `video`, decoded by a thread of their own into a bounded hand-off."""

    def __init__(
        self,
        reader: RangeReader,
        video: VideoInfo,
        first: int,
        end: int,
        what: str,
        threads: int = 0,
        hwaccel: Any = None,
    ) -> None:
        self.reader = reader
        self.video = video
        self.first = first
        self.end = end
        self._what = what
        self._threads = threads
        self._hwaccel = hwaccel
        self._stop = PipelineStop()
        self._handoff: Handoff[_Item] = Handoff(frames_ahead(video), self._stop)
        self._thread = threading.Thread(target=self._run, name="decode-ahead", daemon=True)
        self.busy_s = 0.0  # the decoder's own time, its reads included
        self._read_before = reader.read_s
        self.started_at: float | None = None

    @property
    def capacity(self) -> int:
        return self._handoff.capacity

    def start(self) -> DecodeAhead:
        if self.started_at is None:
            self.started_at = time.monotonic()
            self._thread.start()
        return self

    def _run(self) -> None:
        iterator = iter_frames(self.reader, self.video, self.first, self.end, self._what, self._threads, self._hwaccel)
        try:
            while True:
                began = time.perf_counter()
                try:
                    item: _Item = next(iterator)
                except StopIteration:
                    self.busy_s += time.perf_counter() - began
                    self._handoff.put(_Ended())
                    return
                self.busy_s += time.perf_counter() - began
                self._handoff.put(item)
        except Stopped:
            return
        except BaseException as error:  # the engine side raises it, in its own thread
            try:
                self._handoff.put(_Failed(error))
            except Stopped:
                return
        finally:
            close = getattr(iterator, "close", None)  # a generator: its container is closed now
            if close is not None:
                close()

    def frames(self, clock: StageClock, waits_stage: str = "engine_waits_input") -> Iterator[tuple[int, Image, float]]:
        """(index, image, seconds waited for it) in order, on the consumer's side; a decoding failure is raised here.

        Waits are added to `clock` under `waits_stage`; the hand-offs themselves under `transfer`.
        """
        self.start()
        first = True
        while True:
            item, waited, moved = self._handoff.get()
            # The wait for the first frame is the decoder's start (seek, lead-up to the range's first frame).
            clock.add("first_frame" if first else waits_stage, waited)
            first = False
            clock.add("transfer", moved)
            if isinstance(item, _Ended):
                return
            if isinstance(item, _Failed):
                raise item.error
            index, image = item
            yield index, image, waited

    def close(self) -> None:
        """Stop the decoder (wherever it is) and wait for its thread."""
        self._stop.stop()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
            if self._thread.is_alive():
                logger.warning("%s: the decoder thread did not stop within 30 s", self._what)

    def account(self, clock: StageClock) -> None:
        """Add the decoder's read and decode seconds to `clock` (once, when the render is done with it)."""
        read_s = self.reader.read_s - self._read_before
        clock.add("read", read_s)
        clock.add("decode", max(0.0, self.busy_s - read_s))
