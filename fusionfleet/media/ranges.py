"""A seekable, read-only file object over byte ranges, so the demuxer fetches only what it needs.

The slicer and the workers open user videos through this reader rather than handing ffmpeg a URL:
ffmpeg then never resolves a protocol of its own, every byte read is counted, and the same code
reads S3 objects and local files.
"""

from __future__ import annotations

import io
import time
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

from fusionfleet.errors import InputRejected


class RangeSource(Protocol):
    """Something with a size that can return bytes [start, end)."""

    @property
    def size(self) -> int: ...

    def read_range(self, start: int, end: int) -> bytes: ...


class FileRangeSource:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._size = path.stat().st_size

    @property
    def size(self) -> int:
        return self._size

    def read_range(self, start: int, end: int) -> bytes:
        with self._path.open("rb") as handle:
            handle.seek(start)
            return handle.read(end - start)


class RangeReader(io.RawIOBase):
    """Reads through a small LRU of aligned blocks; enforces a wall-clock deadline on every read.

    The deadline check is what bounds a hostile file's probe: every demuxer step reads, so a file
    that keeps the demuxer busy runs into it.
    """

    def __init__(
        self,
        source: RangeSource,
        what: str,
        block_size: int = 256 * 1024,
        cached_blocks: int = 8,
        deadline_s: float | None = None,
    ) -> None:
        super().__init__()
        self._source = source
        self._what = what
        self._block_size = block_size
        self._cached_blocks = cached_blocks
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        self._position = 0
        self._deadline = None if deadline_s is None else time.monotonic() + deadline_s
        self._deadline_s = deadline_s
        self.bytes_fetched = 0
        self.requests = 0
        self.read_s = 0.0  # seconds spent fetching from the source (a segment's read stage)

    @property
    def size(self) -> int:
        return self._source.size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            position = offset
        elif whence == io.SEEK_CUR:
            position = self._position + offset
        elif whence == io.SEEK_END:
            position = self._source.size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        self._position = max(0, position)
        return self._position

    def _block(self, number: int) -> bytes:
        cached = self._blocks.get(number)
        if cached is not None:
            self._blocks.move_to_end(number)
            return cached
        start = number * self._block_size
        end = min(self._source.size, start + self._block_size)
        began = time.perf_counter()
        data = self._source.read_range(start, end)
        self.read_s += time.perf_counter() - began
        self.bytes_fetched += len(data)
        self.requests += 1
        self._blocks[number] = data
        while len(self._blocks) > self._cached_blocks:
            self._blocks.popitem(last=False)
        return data

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise InputRejected(f"{self._what} took longer than {self._deadline_s:g} s to read")
        if self._position >= self._source.size:
            return 0
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), self._source.size - self._position)
        done = 0
        while done < wanted:
            number, offset = divmod(self._position, self._block_size)
            block = self._block(number)
            chunk = block[offset : offset + wanted - done]
            if not chunk:
                break
            view[done : done + len(chunk)] = chunk
            done += len(chunk)
            self._position += len(chunk)
        return done

    def read_at(self, start: int, end: int) -> bytes:
        """Bytes [start, end) straight from the source (no block cache), counted like every read."""
        began = time.perf_counter()
        data = self._source.read_range(start, min(end, self._source.size))
        self.read_s += time.perf_counter() - began
        self.bytes_fetched += len(data)
        self.requests += 1
        return data

    def head(self, count: int) -> bytes:
        """The first `count` bytes, without moving the read position."""
        saved = self._position
        self._position = 0
        try:
            data = bytearray(count)
            got = self.readinto(data)
            return bytes(data[:got])
        finally:
            self._position = saved
