"""Check a face image without trusting its name: sniff, size limits, and one real decode (PyAV)."""

from __future__ import annotations

import io
from dataclasses import dataclass

import av

from fusionfleet.errors import InputRejected
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import SAFE_DEMUXER_OPTIONS
from fusionfleet.media.sniff import SNIFF_BYTES, sniff_image

_DEMUXERS = {"jpeg": "jpeg_pipe", "png": "png_pipe", "webp": "webp_pipe"}


@dataclass(frozen=True)
class ImageInfo:
    format: str
    width: int
    height: int


def check_image(data: bytes, what: str, limits: MediaLimits) -> ImageInfo:
    if not data:
        raise InputRejected(f"{what} is empty (0 bytes)")
    if len(data) > limits.max_image_bytes:
        raise InputRejected(f"{what} is {len(data)} bytes, over the limit of {limits.max_image_bytes} bytes")
    kind = sniff_image(data[:SNIFF_BYTES], what)
    try:
        with av.open(io.BytesIO(data), format=_DEMUXERS[kind], options=dict(SAFE_DEMUXER_OPTIONS)) as container:
            if not container.streams.video:
                raise InputRejected(f"{what} holds no picture")
            stream = container.streams.video[0]
            width, height = int(stream.codec_context.width or 0), int(stream.codec_context.height or 0)
            if width * height > limits.max_image_pixels:
                raise InputRejected(f"{what} is {width}×{height}, over the limit of {limits.max_image_pixels} pixels")
            frame = next(iter(container.decode(stream)), None)  # type: ignore[union-attr]
    except av.FFmpegError as error:
        raise InputRejected(f"{what} is not a readable {kind.upper()} image: {error}") from error
    if frame is None:
        raise InputRejected(f"{what} is not a readable {kind.upper()} image")
    return ImageInfo(kind, frame.width, frame.height)
