"""Check an image without trusting its name: sniff, size limits, and one real decode (PyAV).

Faces and image targets alike: an image is only ever opened with the pipe demuxer of the format its
first bytes show, with no protocol to open anything else (SAFE_DEMUXER_OPTIONS).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import av
import numpy as np
import numpy.typing as npt

from fusionfleet.errors import InputRejected
from fusionfleet.media.info import VideoInfo
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import SAFE_DEMUXER_OPTIONS
from fusionfleet.media.sniff import IMAGE_NAMES, SNIFF_BYTES, sniff_image

# PyAV's demuxer for each image format: one picture, read from memory or a RangeReader.
IMAGE_DEMUXERS = {"jpeg": "jpeg_pipe", "png": "png_pipe", "webp": "webp_pipe", "bmp": "bmp_pipe", "tiff": "tiff_pipe"}


@dataclass(frozen=True)
class ImageInfo:
    format: str
    width: int
    height: int
    alpha: bool = False  # the picture has an alpha plane (kept through a render, as FaceFusion keeps it)


def _has_alpha(frame: av.VideoFrame) -> bool:
    return any(component.is_alpha for component in frame.format.components)


def _decode(data: bytes, what: str, limits: MediaLimits) -> tuple[str, av.VideoFrame]:
    if not data:
        raise InputRejected(f"{what} is empty (0 bytes)")
    if len(data) > limits.max_image_bytes:
        raise InputRejected(f"{what} is {len(data)} bytes, over the limit of {limits.max_image_bytes} bytes")
    kind = sniff_image(data[:SNIFF_BYTES], what)
    name = IMAGE_NAMES[kind]
    try:
        options = dict(SAFE_DEMUXER_OPTIONS)
        with av.open(io.BytesIO(data), format=IMAGE_DEMUXERS[kind], options=options) as container:
            if not container.streams.video:
                raise InputRejected(f"{what} holds no picture")
            stream = container.streams.video[0]
            width, height = int(stream.codec_context.width or 0), int(stream.codec_context.height or 0)
            if width * height > limits.max_image_pixels:
                raise InputRejected(f"{what} is {width}×{height}, over the limit of {limits.max_image_pixels} pixels")
            frame = next(iter(container.decode(stream)), None)  # type: ignore[union-attr]
    except av.FFmpegError as error:
        raise InputRejected(f"{what} is not a readable {name} image: {error}") from error
    if frame is None or frame.width <= 0 or frame.height <= 0:
        raise InputRejected(f"{what} is not a readable {name} image")
    if frame.width * frame.height > limits.max_image_pixels:
        raise InputRejected(
            f"{what} is {frame.width}×{frame.height}, over the limit of {limits.max_image_pixels} pixels"
        )
    return kind, frame


def check_image(data: bytes, what: str, limits: MediaLimits) -> ImageInfo:
    kind, frame = _decode(data, what, limits)
    return ImageInfo(kind, frame.width, frame.height, _has_alpha(frame))


def decode_image(
    data: bytes, what: str, limits: MediaLimits
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8] | None]:
    """(BGR picture, alpha plane or None) of a checked image, decoded once with its sniffed demuxer."""
    _kind, frame = _decode(data, what, limits)
    bgr = np.ascontiguousarray(frame.to_ndarray(format="bgr24"), dtype=np.uint8)
    if not _has_alpha(frame):
        return bgr, None
    alpha = np.ascontiguousarray(frame.to_ndarray(format="bgra")[:, :, 3], dtype=np.uint8)
    # Some decoders (WebP's) always give an alpha plane: an opaque one is no alpha at all.
    return bgr, None if bool((alpha == 255).all()) else alpha


def image_as_video(info: ImageInfo, size_bytes: int) -> VideoInfo:
    """An image target as the planner sees it: one frame, on its pipe demuxer (which the frame decoder
    opens like any container), with no audio. Its rate is nominal: one frame lasts one second."""
    return VideoInfo(
        container=IMAGE_DEMUXERS[info.format],
        codec=info.format,
        width=info.width,
        height=info.height,
        rotation=0,
        fps_num=1,
        fps_den=1,
        frame_count=1,
        duration_s=1.0,
        start_s=0.0,
        variable_frame_rate=False,
        size_bytes=size_bytes,
    )
