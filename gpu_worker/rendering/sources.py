"""A job's sources: face images fetched once per worker and job, checked, decoded to BGR; and its audio
source, copied once per worker and job into the worker's scratch folder (FaceFusion reads it by path)."""

from __future__ import annotations

import hashlib
import shutil
from collections import OrderedDict
from pathlib import Path

import cv2
import numpy as np

from fusionfleet.adapters.storage import S3RangeSource, Storage
from fusionfleet.errors import InputRejected
from fusionfleet.media.image import check_image
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.ranges import RangeReader
from fusionfleet.media.source_audio import copy_audio
from fusionfleet.messages import JobContext, ObjectRef
from gpu_worker.engines.base import Image, Person


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
        self._people: OrderedDict[str, tuple[Person, ...]] = OrderedDict()

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

    def people(self, job: JobContext) -> tuple[Person, ...]:
        """A job with `faces`: each person's sources and reference face (decoded once per worker and job)."""
        if not job.faces:
            return ()
        cached = self._people.get(job.job_id)
        if cached is None:
            sources, _ = self.get(job)
            cached = tuple(
                Person(
                    sources=tuple(sources[i] for i in face.sources),
                    reference=self._fetch(face.reference, f"faces[{index}].reference {face.reference.key!r}"),
                    position=face.position,
                    reference_is_frame=face.frame is not None,
                    options=face.options,
                )
                for index, face in enumerate(job.faces)
            )
            self._people[job.job_id] = cached
            while len(self._people) > self._size:
                self._people.popitem(last=False)
        self._people.move_to_end(job.job_id)
        return cached


class AudioSources:
    """Each job's audio source, copied once (packets unchanged) into a folder of the job's own: one path
    per job, so FaceFusion's audio cache (keyed by path) never answers one job with another's sound."""

    def __init__(self, storage: Storage, size: int = 2) -> None:
        self._storage = storage
        self._size = size
        self._jobs: OrderedDict[str, Path] = OrderedDict()

    def get(self, job: JobContext, scratch: Path) -> Path | None:
        if job.audio is None:
            return None
        path = self._jobs.get(job.job_id)
        if path is None or not path.is_file():
            digest = hashlib.blake2b(job.job_id.encode(), digest_size=8).hexdigest()
            folder = scratch / "audio-sources" / digest
            folder.mkdir(parents=True, exist_ok=True)
            source = job.audio.file
            what = f"audio source {source.key!r}"
            reader = RangeReader(S3RangeSource(self._storage, source.bucket, source.key, source.size), what=what)
            path = copy_audio(reader, job.audio.info, folder, what)
            self._jobs[job.job_id] = path
            while len(self._jobs) > self._size:
                _, gone = self._jobs.popitem(last=False)
                shutil.rmtree(gone.parent, ignore_errors=True)
        self._jobs.move_to_end(job.job_id)
        return path
