"""A bounded queue between two stages of a segment's pipeline, and the stop they share.

Each stage runs in a thread of its own; a stage that fails records why and stops the others, so no
stage blocks on a queue that nobody will drain or fill again, and the first failure is the one raised.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Generic, TypeVar

T = TypeVar("T")
# How often a blocked stage looks whether another one failed; a hand-off itself wakes at once.
POLL_S = 0.1


class Stopped(Exception):
    """This stage was stopped because another one failed or the render was abandoned."""


class PipelineStop:
    """The stop every stage of one pipeline watches, with the first failure that caused it."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self.error: BaseException | None = None

    def fail(self, error: BaseException) -> None:
        """Stop every stage because of `error` (only the first failure is kept)."""
        with self._lock:
            if self.error is None:
                self.error = error
        self._event.set()

    def stop(self) -> None:
        """Stop every stage without a failure of its own (the render is being abandoned)."""
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def raise_failure(self) -> None:
        """Raise the failure that stopped the pipeline, if one did."""
        if self.error is not None:
            raise self.error


class Handoff(Generic[T]):
    """A bounded FIFO whose `put` and `get` give up when the pipeline stops; both say how long they waited."""

    def __init__(self, capacity: int, stop: PipelineStop) -> None:
        if capacity < 1:
            raise ValueError("a hand-off holds at least one item")
        self._queue: queue.Queue[T] = queue.Queue(maxsize=capacity)
        self._stop = stop
        self.capacity = capacity

    def put(self, item: T) -> tuple[float, float]:
        """Hand `item` on: (seconds waited for room, seconds the hand-off itself took)."""
        began = time.perf_counter()
        try:
            self._queue.put_nowait(item)
            return 0.0, time.perf_counter() - began
        except queue.Full:
            pass
        while True:
            if self._stop.is_set():
                raise Stopped("the pipeline stopped")
            try:
                self._queue.put(item, timeout=POLL_S)
                return time.perf_counter() - began, 0.0
            except queue.Full:
                continue

    def get(self) -> tuple[T, float, float]:
        """The next item: (item, seconds waited for it, seconds the hand-off itself took)."""
        began = time.perf_counter()
        try:
            item = self._queue.get_nowait()
            return item, 0.0, time.perf_counter() - began
        except queue.Empty:
            pass
        while True:
            if self._stop.is_set():
                raise Stopped("the pipeline stopped")
            try:
                item = self._queue.get(timeout=POLL_S)
                return item, time.perf_counter() - began, 0.0
            except queue.Empty:
                continue


def queue_frames(frame_bytes: int, budget_bytes: int, most: int, least: int = 2) -> int:
    """How many frames a queue may hold within `budget_bytes` (at least `least`, at most `most`). Pure."""
    if frame_bytes <= 0:
        return most
    return max(least, min(most, budget_bytes // frame_bytes))
