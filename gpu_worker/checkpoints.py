"""Checkpoints inside a segment: its chunks, each uploaded as soon as it is encoded.

A chunk's key names its frame range, so a redelivered segment finds what is done by listing one
prefix; only an unbroken run of chunks from the segment's start counts, and each one is checked
before it is trusted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from fusionfleet import layout
from fusionfleet.errors import MediaError
from fusionfleet.media.inspect import summarize
from fusionfleet.storage import Storage

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Chunk:
    first: int
    end: int
    key: str


def parse_chunks(keys: list[str]) -> list[Chunk]:
    chunks = []
    for key in keys:
        found = layout.parse_chunk_key(key)
        if found is not None:
            chunks.append(Chunk(found.first, found.end, key))
    return sorted(chunks, key=lambda chunk: (chunk.first, chunk.end))


def done_prefix(chunks: list[Chunk], grid: list[tuple[int, int]]) -> list[Chunk]:
    """The chunks that match the grid from its start without a gap. Pure."""
    by_range = {(chunk.first, chunk.end): chunk for chunk in chunks}
    done = []
    for cell in grid:
        chunk = by_range.get(cell)
        if chunk is None:
            break
        done.append(chunk)
    return done


def saved_frames(chunks: list[Chunk], start: int) -> int:
    """Frames checkpointed in an unbroken run of chunks from `start` (unchecked: a listing only). Pure."""
    ends = {chunk.first: chunk.end for chunk in chunks}
    frame = start
    while frame in ends and ends[frame] > frame:
        frame = ends[frame]
    return frame - start


class Checkpoints:
    def __init__(self, storage: Storage, bucket: str, job_id: str, segment: int) -> None:
        self._storage = storage
        self._bucket = bucket
        self._job_id = job_id
        self._segment = segment

    def save(self, path: Path, first: int, end: int) -> None:
        self._storage.upload_file(
            self._bucket, layout.chunk_key(self._job_id, self._segment, first, end), path, "video/mp4"
        )

    def saved(self, start: int) -> int:
        """Frames of the segment (from `start`) its chunks hold so far: the progress its attempts made."""
        return saved_frames(parse_chunks(self._storage.list_keys(self._bucket, self._prefix())), start)

    def _prefix(self) -> str:
        return layout.checkpoint_prefix(self._job_id, self._segment)

    def restore(self, grid: list[tuple[int, int]], workdir: Path) -> list[Path]:
        """Download the finished chunks of `grid` into workdir; stop at the first missing or broken one."""
        prefix = layout.checkpoint_prefix(self._job_id, self._segment)
        listed = parse_chunks(self._storage.list_keys(self._bucket, prefix))
        restored = []
        for chunk in done_prefix(listed, grid):
            path = workdir / f"{chunk.first:07d}-{chunk.end:07d}.mp4"
            self._storage.download_file(self._bucket, chunk.key, path)
            try:
                frames = summarize(path, decode=False).frame_count
            except MediaError as error:
                logger.warning("checkpoint %s unreadable (%s); rendering from frame %s", chunk.key, error, chunk.first)
                break
            if frames != chunk.end - chunk.first:
                logger.warning("checkpoint %s has %s frames; rendering from frame %s", chunk.key, frames, chunk.first)
                break
            restored.append(path)
        return restored

    def clear(self) -> None:
        self._storage.delete_prefix(self._bucket, layout.checkpoint_prefix(self._job_id, self._segment))
