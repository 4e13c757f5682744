"""The next segment's decoder, started while this one renders: its download and first frames are ready
when its turn comes.

Only for a task this worker already holds (one taken early by gpu_worker.delivery.lookahead): nothing here takes
work another worker could have. Reading is all it does (no checkpoint is listed, nothing is written), so
a task that never comes costs only the frames decoded ahead, dropped when another is prepared or the
worker stops. A prepared decoder is used when the render asks for the same frames: a segment that
resumes from a checkpoint starts elsewhere and decodes anew.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from fusionfleet.adapters.storage import S3RangeSource, Storage
from fusionfleet.media.ranges import RangeReader
from fusionfleet.messages import RenderTask
from gpu_worker.rendering.decode_ahead import DecodeAhead

logger = logging.getLogger(__name__)

READ_BLOCK = 2 * 1024 * 1024


def target_reader(storage: Storage, task: RenderTask) -> RangeReader:
    """A reader of the task's target, as a segment's render opens one."""
    target = task.job.target
    return RangeReader(
        S3RangeSource(storage, target.bucket, target.key, target.size),
        what=f"target {target.key!r}",
        block_size=READ_BLOCK,
        cached_blocks=4,
    )


def task_key(task: RenderTask) -> tuple[str, int, int]:
    return task.job.job_id, task.segment.index, task.copy_number


class Prefetcher:
    """At most one decoder started ahead, for the task this worker will render next."""

    def __init__(self, storage: Storage, lead_in: int, decode_threads: int = 0, hwaccel: Any = None) -> None:
        self._storage = storage
        self._lead_in = lead_in
        self._threads = decode_threads
        self._hwaccel = hwaccel
        self._lock = threading.Lock()
        self._key: tuple[str, int, int] | None = None
        self._ahead: DecodeAhead | None = None
        self.prepared = 0  # decoders started ahead, and used, for the log and the tests
        self.used = 0

    def prepare(self, task: RenderTask) -> None:
        """Start decoding `task`'s frames (from its lead-in) now; any earlier one prepared is dropped."""
        segment = task.segment
        first = max(0, segment.start_frame - self._lead_in)
        what = f"segment {segment.index} of {task.job.job_id}"
        ahead = DecodeAhead(target_reader(self._storage, task), task.job.video, first, segment.end_frame, what,
                            self._threads, self._hwaccel)  # fmt: skip
        with self._lock:
            dropped, self._ahead, self._key = self._ahead, ahead, task_key(task)
            self.prepared += 1
        if dropped is not None:
            dropped.close()
        ahead.start()
        logger.info("%s: decoding ahead from frame %s while the segment before it renders", what, first)

    def take(self, task: RenderTask) -> DecodeAhead | None:
        """The decoder prepared for `task`, if one was (it is then the caller's); None otherwise.

        One prepared for another task stays: it is for the task after this one (taken early while this
        one was starting), or is dropped by the next `prepare` or `close`.
        """
        with self._lock:
            if self._ahead is None or self._key != task_key(task):
                return None
            ahead, self._ahead, self._key = self._ahead, None, None
            self.used += 1
        return ahead

    def close(self) -> None:
        with self._lock:
            ahead, self._ahead, self._key = self._ahead, None, None
        if ahead is not None:
            ahead.close()
