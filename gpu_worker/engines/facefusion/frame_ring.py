"""A ring of frame buffers in shared memory between the warm engine and its FaceFusion process.

Frames then cross without the pipe: the engine writes a frame into a slot of the input ring and sends only
the slot's number; FaceFusion's process copies it out, and writes its result into the output ring the same
way. Each side copies a frame once, where the pipe cost several copies and two trips through the kernel
(6 MB a frame at 1080p). Who may write a slot when is the protocol's business (warm.py, warm_server.py):
the engine reuses an input slot only once the output that proves it was read has arrived, and the process
writes an output slot only once the engine has taken the output that used it before.

Imports only the standard library and numpy: FaceFusion's process (warm_server.py, in FaceFusion's own
interpreter) imports this module from beside itself.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from multiprocessing import resource_tracker, shared_memory
from typing import Any

import numpy as np

SHM_FOLDER = "/dev/shm"
# Rings are named for the process that owns them, so one left behind (a killed process) says whose it was.
NAME_PREFIX = "fusionfleet-ring"
_made = itertools.count()


class FrameRing:
    """`slots` buffers of `slot_bytes` each, in one shared memory block."""

    def __init__(self, block: shared_memory.SharedMemory, slots: int, slot_bytes: int, owner: bool) -> None:
        self._block = block
        self.slots = slots
        self.slot_bytes = slot_bytes
        self._owner = owner

    @classmethod
    def create(cls, slots: int, slot_bytes: int) -> FrameRing:
        """A new ring this side owns (and removes on close); OSError when shared memory cannot hold it."""
        name = f"{NAME_PREFIX}-{os.getpid()}-{next(_made)}"
        block = shared_memory.SharedMemory(name=name, create=True, size=slots * slot_bytes)
        return cls(block, slots, slot_bytes, owner=True)

    @classmethod
    def attach(cls, described: dict[str, Any]) -> FrameRing:
        """The other side's ring, from its `describe()`; never removed from here."""
        block = shared_memory.SharedMemory(name=str(described["name"]))
        # Python < 3.13 registers an attached block with this process's resource tracker, which would
        # remove it when this process exits: the owner removes it, so it is unregistered here.
        with contextlib.suppress(Exception):
            resource_tracker.unregister(block._name, "shared_memory")  # type: ignore[attr-defined]
        return cls(block, int(described["slots"]), int(described["slot_bytes"]), owner=False)

    def describe(self) -> dict[str, Any]:
        return {"name": self._block.name, "slots": self.slots, "slot_bytes": self.slot_bytes}

    def fits(self, shape: tuple[int, ...]) -> bool:
        return int(np.prod(shape)) <= self.slot_bytes

    def slot_of(self, number: int) -> int:
        return number % self.slots

    def put(self, slot: int, image: np.ndarray) -> None:
        """Copy `image` (uint8) into `slot`."""
        view = np.ndarray(image.shape, dtype=np.uint8, buffer=self._block.buf, offset=slot * self.slot_bytes)
        view[...] = image

    def take(self, slot: int, shape: tuple[int, ...]) -> np.ndarray:
        """A copy of the image of `shape` in `slot` (the slot may be written again at once)."""
        view = np.ndarray(shape, dtype=np.uint8, buffer=self._block.buf, offset=slot * self.slot_bytes)
        return view.copy()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._block.close()
        if self._owner:
            with contextlib.suppress(FileNotFoundError):
                self._block.unlink()


def shm_room(folder: str = SHM_FOLDER) -> int:
    """Bytes free for shared memory (a container's /dev/shm is often small); 0 where there is none."""
    try:
        stats = os.statvfs(folder)
    except OSError:
        return 0
    return stats.f_bavail * stats.f_frsize


def ring_slots(in_flight: int) -> int:
    """Slots for a process that holds up to `in_flight` frames before it answers the first. Pure.

    The engine writes frame n only after taking output n - slots; the process answers output m only after
    reading frame m + in_flight - 1 or the segment's end. Fewer slots than in_flight + 1 would wait for ever.
    """
    return in_flight + 2
