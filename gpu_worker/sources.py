"""Face images for a job: fetched once per worker and job, checked, decoded to BGR."""

from __future__ import annotations

from collections import OrderedDict

import cv2
import numpy as np

from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import InputRejected
from fusionfleet.media.image import check_image
from fusionfleet.media.limits import MediaLimits
from fusionfleet.messages import JobContext, ObjectRef
from gpu_worker.engines.base import Image


def decode_image(data: bytes, what: str, limits: MediaLimits) -> Image:
    check_image(data, what, limits)
    image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise InputRejected(f"{what} could not be decoded")
    return np.ascontiguousarray(image)


class SourceCache:
    """A small LRU keyed by job id: consecutive segments of a job reuse the decoded faces."""

    def __init__(self, storage: Storage, limits: MediaLimits, size: int = 4) -> None:
        self._storage = storage
        self._limits = limits
        self._size = size
        self._jobs: OrderedDict[str, tuple[tuple[Image, ...], Image | None]] = OrderedDict()

    def _fetch(self, ref: ObjectRef, what: str) -> Image:
        return decode_image(self._storage.get_bytes(ref.bucket, ref.key), what, self._limits)

    def get(self, job: JobContext) -> tuple[tuple[Image, ...], Image | None]:
        cached = self._jobs.get(job.job_id)
        if cached is None:
            sources = tuple(self._fetch(ref, f"source[{i}] {ref.key!r}") for i, ref in enumerate(job.sources))
            # A reference image, or the job's reference frame (decoded once by the slicer): the engines
            # take the reference face from either the same way.
            if job.reference is not None:
                reference: Image | None = self._fetch(job.reference, f"reference {job.reference.key!r}")
            elif job.reference_frame is not None:
                reference = self._fetch(job.reference_frame, "the job's reference frame")
            else:
                reference = None
            cached = (sources, reference)
            self._jobs[job.job_id] = cached
            while len(self._jobs) > self._size:
                self._jobs.popitem(last=False)
        self._jobs.move_to_end(job.job_id)
        return cached
