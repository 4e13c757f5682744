"""Warm and cold stop, as rq does it: the first SIGTERM/SIGINT stops taking work, the second aborts."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

logger = logging.getLogger(__name__)


class ColdStop(BaseException):
    """Raised in the main thread on the second signal; BaseException so no handler swallows it."""


class StopSignal:
    def __init__(self) -> None:
        self.requested = threading.Event()
        self._count = 0

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)

    def request(self) -> None:
        self.requested.set()

    def _handle(self, number: int, frame: FrameType | None) -> None:
        self._count += 1
        name = signal.Signals(number).name
        if self._count == 1:
            logger.info("%s received: finishing the current task, taking no more (again to abort)", name)
            self.requested.set()
            return
        logger.warning("%s received again: aborting the current task", name)
        raise ColdStop(name)
