"""One frame out of a video, and a still image's bytes: for job-level inputs decoded once (the reference frame)."""

from __future__ import annotations

import io

import av
import numpy as np

from fusionfleet.media.decode import Image, iter_frames
from fusionfleet.media.probe import VideoInfo
from fusionfleet.media.ranges import RangeReader


def frame_at(reader: RangeReader, info: VideoInfo, index: int, what: str) -> Image:
    """Frame `index` of the video, upright, as the workers decode it (the same grid and seek)."""
    return next(image for _, image in iter_frames(reader, info, index, index + 1, what))


def encode_png(image: Image) -> bytes:
    """Lossless PNG of a BGR image, so every worker decodes the very same pixels."""
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="bgr24")
    codec = av.CodecContext.create("png", "w")
    codec.width, codec.height, codec.pix_fmt = image.shape[1], image.shape[0], "rgb24"
    packets = [*codec.encode(frame.reformat(format="rgb24")), *codec.encode(None)]
    buffer = io.BytesIO()
    for packet in packets:
        buffer.write(bytes(packet))
    return buffer.getvalue()
