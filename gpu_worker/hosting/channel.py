"""The worker's end of the engine process's pipe.

The engine process answers requests in order (`Reply`), and, apart from them, says when a segment's
encoder has finished (`Encoded`, for a segment it answered early: gpu_worker.hosting.engine_child).
A reader thread takes every message off the pipe as it comes, so an `Encoded` reaches the finish
waiting for it whether or not a render is waiting for its own reply meanwhile.
"""

from __future__ import annotations

import queue
import threading
import time
from multiprocessing.connection import Connection

from gpu_worker.hosting.engine_child import Encoded, Reply, Request


class EngineChannel:
    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._sending = threading.Lock()  # a prefetch is sent from the lookahead's thread
        self._replies: queue.Queue[Reply] = queue.Queue()
        self._encoded: dict[str, Encoded] = {}
        self._changed = threading.Condition()
        self._open = True
        self._reader = threading.Thread(target=self._read, name="engine-pipe", daemon=True)
        self._reader.start()

    @property
    def open(self) -> bool:
        """False once the engine process's end is closed (it exited or died): nothing more will come."""
        with self._changed:
            return self._open

    def send(self, request: Request) -> None:
        with self._sending:
            self._conn.send(request)

    def reply(self, timeout_s: float) -> Reply | None:
        """The next reply, or None when none came within `timeout_s`."""
        try:
            return self._replies.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def encoded(self, workdir: str, timeout_s: float) -> Encoded | None:
        """The end of the encoder of the segment rendered in `workdir`, or None when it has not come within
        `timeout_s` or cannot come any more (see `open`)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while workdir not in self._encoded and self._open:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)
            return self._encoded.pop(workdir, None)

    def close(self) -> None:
        self._conn.close()

    def _read(self) -> None:
        while True:
            try:
                message: Reply | Encoded = self._conn.recv()
            except (EOFError, OSError):
                break
            if isinstance(message, Encoded):
                with self._changed:
                    self._encoded[message.workdir] = message
                    self._changed.notify_all()
            else:
                self._replies.put(message)
        with self._changed:
            self._open = False
            self._changed.notify_all()
