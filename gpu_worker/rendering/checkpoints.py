"""Checkpoints inside a segment: its chunks, each uploaded as soon as it is encoded.

A chunk's key names its frame range, so a redelivered segment finds what is done by listing one
prefix; only an unbroken run of chunks from the segment's start counts, and each one is checked
before it is trusted.

Beside a chunk an engine that carries temporal state (gpu_worker.engines.base.CarriesState) saves
that state as it stood after the chunk's last frame (`<first>-<end>.state`, uploaded before the
chunk, so a chunk never lacks the state written with it). A resumed render continues from it and
equals an undisturbed one bit for bit. The state is versioned; a checkpoint without one (written
by an older worker, or by an engine without state) resumes with the lead-in as before, and older
workers ignore state files (they list only `.mp4` keys).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fusionfleet import layout
from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import MediaError, ObjectMissing
from fusionfleet.media.inspect import summarize

logger = logging.getLogger(__name__)

# The output frames a chunk of target frames [first, end) holds (a job's timeline: fusionfleet.jobs.timeline).
Shown = Callable[[int, int], int]


@dataclass(frozen=True)
class Chunk:
    first: int
    end: int
    key: str


# The envelope around an engine's state; the engine versions what is inside.
STATE_FORMAT = 1


@dataclass(frozen=True)
class Restored:
    chunks: list[Path]
    # The engine state after the last restored chunk; None: resume with the lead-in.
    state: bytes | None = None


def seal_state(engine: str, state: bytes) -> bytes:
    """The state in its envelope: one JSON line naming the format and the engine, then the engine's bytes. Pure."""
    return json.dumps({"format": STATE_FORMAT, "engine": engine}).encode() + b"\n" + state


def open_state(sealed: bytes, engine: str) -> bytes | None:
    """The engine's bytes, or None when the envelope is of another format or engine. Pure."""
    header, _, state = sealed.partition(b"\n")
    try:
        meta = json.loads(header)
    except ValueError:
        return None
    if not isinstance(meta, dict) or meta.get("format") != STATE_FORMAT or meta.get("engine") != engine:
        return None
    return state


def parse_chunks(keys: list[str]) -> list[Chunk]:
    chunks = []
    for key in keys:
        found = layout.parse_chunk_key(key)
        if found is not None and found.kind == "mp4":
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

    def save_state(self, engine: str, first: int, end: int, state: bytes) -> None:
        """Before `save()` of the same chunk: a saved chunk then always has its state beside it."""
        key = layout.chunk_state_key(self._job_id, self._segment, first, end)
        self._storage.put_bytes(self._bucket, key, seal_state(engine, state), "application/octet-stream")

    def restore_with_state(
        self, grid: list[tuple[int, int]], workdir: Path, engine: str, shown: Shown | None = None
    ) -> Restored:
        """`restore()`, and the engine's state after the last restored chunk when it was saved."""
        chunks = self.restore(grid, workdir, shown)
        if not chunks:
            return Restored(chunks)
        first, end = grid[len(chunks) - 1]
        try:
            sealed = self._storage.get_bytes(
                self._bucket, layout.chunk_state_key(self._job_id, self._segment, first, end)
            )
        except ObjectMissing:
            logger.info("checkpoint %s-%s has no engine state; resuming with the lead-in", first, end)
            return Restored(chunks)
        state = open_state(sealed, engine)
        if state is None:
            logger.warning("state of checkpoint %s-%s is not %s's; resuming with the lead-in", first, end, engine)
        return Restored(chunks, state)

    def restore(self, grid: list[tuple[int, int]], workdir: Path, shown: Shown | None = None) -> list[Path]:
        """Download the finished chunks of `grid` into workdir; stop at the first missing or broken one.

        `shown(first, end)`: the output frames a chunk of target frames [first, end) holds (the job's
        timeline; one each by default)."""
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
            if frames != (shown(chunk.first, chunk.end) if shown else chunk.end - chunk.first):
                logger.warning("checkpoint %s has %s frames; rendering from frame %s", chunk.key, frames, chunk.first)
                break
            restored.append(path)
        return restored

    def clear(self) -> None:
        self._storage.delete_prefix(self._bucket, layout.checkpoint_prefix(self._job_id, self._segment))
