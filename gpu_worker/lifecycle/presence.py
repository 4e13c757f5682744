"""The worker's presence record: who it is, what it renders, when it last beat.

A small JSON object in the work bucket (`work/_workers/<name>.json`), written every few seconds by
a thread and at the start and end of each task, removed on a clean exit. A worker that stops
beating (SIGKILL, a lost host) keeps its last record, and `fusionfleet workers` shows it as lost
once the record is older than the lapse it is given. No database: the bucket is the registry.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable

from fusionfleet import layout
from fusionfleet.adapters.storage import Storage
from fusionfleet.messages import WorkerBeat

logger = logging.getLogger(__name__)


class Presence:
    def __init__(
        self,
        storage: Storage,
        bucket: str,
        name: str,
        role: str,
        engine: str = "",
        every_s: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._storage = storage
        self._bucket = bucket
        self._every_s = every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._beat = WorkerBeat(
            name=name, role=role, engine=engine, started_at=clock(), host=socket.gethostname(), pid=os.getpid()
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="presence", daemon=True)

    @property
    def beat(self) -> WorkerBeat:
        return self._beat

    def start(self) -> None:
        self.write()
        self._thread.start()

    def begin(self, current: str, engine: str | None = None) -> None:
        """A task starts: `current` is `<job_id>:<segment>` (or `:merge`)."""
        with self._lock:
            self._beat = self._beat.model_copy(update={"current": current, "engine": engine or self._beat.engine})
        self.write()

    def end(self, succeeded: bool, current: str | None = None) -> None:
        """A task ended; the record stays busy if `current` names an earlier task than the one in hand."""
        with self._lock:
            field = "segments_done" if succeeded else "segments_failed"
            update = {"current": self._after(current), field: getattr(self._beat, field) + 1}
            self._beat = self._beat.model_copy(update=update)
        self.write()

    def idle(self, current: str | None = None) -> None:
        """A task ended without an outcome of its own (released, cancelled, abandoned)."""
        with self._lock:
            self._beat = self._beat.model_copy(update={"current": self._after(current)})
        self.write()

    def _after(self, ended: str | None) -> str | None:
        # A worker finishes a segment in the background while its engine renders the next
        # (gpu_worker.delivery.lookahead): that segment's end must not mark the worker idle.
        if ended is not None and self._beat.current is not None and self._beat.current != ended:
            return self._beat.current
        return None

    def write(self) -> None:
        with self._lock:
            self._beat = self._beat.model_copy(update={"last_beat": round(self._clock(), 3)})
            body = self._beat.model_dump_json().encode()
        try:
            self._storage.put_bytes(self._bucket, layout.worker_key(self._beat.name), body, "application/json")
        except Exception:
            # Presence is for people watching; a failed beat must never stop the work.
            logger.warning("presence record of %s not written", self._beat.name, exc_info=True)

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            self.write()

    def close(self) -> None:
        """A clean exit: stop beating and remove the record (a lost worker is one that did not get here)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        try:
            self._storage.delete_prefix(self._bucket, layout.worker_key(self._beat.name))
        except Exception:
            logger.warning("presence record of %s not removed", self._beat.name, exc_info=True)
