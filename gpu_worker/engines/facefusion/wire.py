"""The warm FaceFusion process's wire format, both sides: each message is a 4-byte big-endian length, a JSON
header of that length, and, when the header has `"bytes": n`, n raw bytes (a frame: height × width × 3 BGR
uint8, or × 4 BGRA where its `"shape"` says so: a job that keeps background_remover's matte); or, with
`"slot"` in its header, a frame left in a shared ring (frame_ring.py).

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
    return np.ascontiguousarray(image, dtype=np.uint8).tobytes()


def output_frame(result: np.ndarray, alpha: bool) -> np.ndarray:
    """A processed frame as it is sent back: BGR, or where the job keeps alpha BGRA (FaceFusion's frame with its
    matte merged, vision.conditional_merge_vision_mask; opaque where its processors left none, as its bgra writer
    and its image2 reader of PNG frames make it)."""
    if not alpha:
        return np.ascontiguousarray(result[:, :, :3], dtype=np.uint8)
    if result.shape[2] == 4:
        return np.ascontiguousarray(result, dtype=np.uint8)
    opaque = np.full((*result.shape[:2], 1), 255, dtype=np.uint8)
    return np.ascontiguousarray(np.concatenate([result[:, :, :3], opaque], axis=2), dtype=np.uint8)


def frame_shape(image: np.ndarray) -> list[int]:
    """A frame's `"shape"` on the wire: [height, width] for BGR, [height, width, 4] for BGRA."""
    return [image.shape[0], image.shape[1]] + ([4] if image.ndim == 3 and image.shape[2] == 4 else [])


def frame_from(header: dict[str, Any], payload: bytes, ring: FrameRing | None = None) -> np.ndarray:
    """A frame sent in the pipe, or (`"slot"` in its header) left in the shared ring: copied out either way."""
    height, width, *channels = header["shape"]
    shape = (height, width, channels[0] if channels else 3)
    if "slot" in header:
        if ring is None:
            raise ValueError("a frame was left in a shared ring this process was not given")
        return ring.take(int(header["slot"]), shape)
    return np.frombuffer(payload, dtype=np.uint8).reshape(shape).copy()
