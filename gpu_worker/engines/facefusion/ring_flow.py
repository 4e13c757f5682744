"""The engine's side of the shared frame rings (frame_ring.py) for one segment: when a slot may be written.

The writer thread sends frame n into input slot n mod slots only once the reader has taken output
n - slots: that output proves FaceFusion's process read the frame that used the slot before (it reads
frames in order and answers a frame only after reading it), and that the output slot it will write
for frame n is free (the reader copies each output out as it takes it). Where shared memory cannot hold
the rings (a container's small /dev/shm), frames go through the pipe as before, said once in the log.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from gpu_worker.engines.facefusion.frame_ring import FrameRing, ring_slots, shm_room

logger = logging.getLogger(__name__)

# Shared memory kept free beside the rings, for whatever else on the host uses it.
SHM_MARGIN_BYTES = 64 * 1024 * 1024


class RingClosed(Exception):
    """The segment ended while the writer waited for a slot."""


class RingFlow:
    """Input and output rings for one segment's frames, and the gate that keeps the writer behind the reader."""

    def __init__(self, in_flight: int, room: int | None = None) -> None:
        self.slots = ring_slots(in_flight)
        self._room = room
        self.input: FrameRing | None = None
        self.output: FrameRing | None = None
        self._taken = 0
        self._closing = False
        self._gate = threading.Condition()

    @property
    def active(self) -> bool:
        return self.input is not None and self.output is not None

    def open(self, frame_bytes: int) -> dict[str, Any] | None:
        """Create the rings for frames of `frame_bytes`; their description for FaceFusion's process, or None
        (the pipe carries the frames) when shared memory has no room for them."""
        needed = 2 * self.slots * frame_bytes
        room = shm_room() if self._room is None else self._room
        if room < needed + SHM_MARGIN_BYTES:
            logger.info(
                "frames go through the pipe: shared memory has %.0f MB free, the rings need %.0f MB",
                room / 2**20, needed / 2**20,
            )  # fmt: skip
            return None
        try:
            self.input = FrameRing.create(self.slots, frame_bytes)
            self.output = FrameRing.create(self.slots, frame_bytes)
        except OSError as error:
            logger.info("frames go through the pipe: the shared rings could not be made (%s)", error)
            self.close()
            return None
        return {"op": "ring", "input": self.input.describe(), "output": self.output.describe()}

    def slot_for(self, number: int) -> int:
        """The input slot for frame `number`, once it is free; RingClosed when the segment ends first."""
        with self._gate:
            while self._taken <= number - self.slots:
                if self._closing:
                    raise RingClosed("the segment ended while a frame waited for a slot")
                self._gate.wait(timeout=1.0)
            return number % self.slots

    def took(self) -> None:
        """The reader has taken (copied out) one more output."""
        with self._gate:
            self._taken += 1
            self._gate.notify_all()

    def stop(self) -> None:
        """Wake a writer waiting for a slot: the segment is over."""
        with self._gate:
            self._closing = True
            self._gate.notify_all()

    def close(self) -> None:
        """Remove the rings (once the writer is done with them)."""
        for ring in (self.input, self.output):
            if ring is not None:
                ring.close()
        self.input = self.output = None
