"""The warm FaceFusion process's wire format, both sides: each message is a 4-byte big-endian length, a JSON
header of that length, and, when the header has `"bytes": n`, n raw bytes (a frame: height × width × 3 BGR
uint8); or, with `"slot"` in its header, a frame left in a shared ring (frame_ring.py).

Imported by the project (`warm_process.py`) and, from beside it, by `warm_server.py` under FaceFusion's
interpreter: it imports only the standard library, numpy and frame_ring.
"""

from __future__ import annotations

import json
import struct
from typing import IO, Any

import numpy as np

try:  # in the project's interpreter (the engine's side); FaceFusion's imports it from beside this file
    from gpu_worker.engines.facefusion.frame_ring import FrameRing
except ImportError:  # pragma: no cover - FaceFusion's interpreter
    from frame_ring import FrameRing  # type: ignore[no-redef,import-not-found]

HEADER = struct.Struct(">I")


def write_message(stream: IO[bytes], header: dict[str, Any], payload: bytes | memoryview = b"") -> None:
    if payload:
        header = {**header, "bytes": len(payload)}
    data = json.dumps(header).encode()
    stream.write(HEADER.pack(len(data)) + data)
    if payload:
        stream.write(payload)
    stream.flush()


def read_exact(stream: IO[bytes], size: int) -> bytes:
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_message(stream: IO[bytes]) -> tuple[dict[str, Any], bytes]:
    (size,) = HEADER.unpack(read_exact(stream, HEADER.size))
    header: dict[str, Any] = json.loads(read_exact(stream, size))
    payload = read_exact(stream, int(header["bytes"])) if header.get("bytes") else b""
    return header, payload


def frame_bytes(image: np.ndarray) -> bytes:
    return np.ascontiguousarray(image[:, :, :3], dtype=np.uint8).tobytes()


def frame_from(header: dict[str, Any], payload: bytes, ring: FrameRing | None = None) -> np.ndarray:
    """A frame sent in the pipe, or (`"slot"` in its header) left in the shared ring: copied out either way."""
    height, width = header["shape"]
    if "slot" in header:
        if ring is None:
            raise ValueError("a frame was left in a shared ring this process was not given")
        return ring.take(int(header["slot"]), (height, width, 3))
    return np.frombuffer(payload, dtype=np.uint8).reshape(height, width, 3).copy()
