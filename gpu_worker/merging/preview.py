"""The before/after preview of a merged job: a contact sheet of a few frames, target left, output right.

Only the sampled frames are decoded (one seek each, in the target and in the merged output); the
sheet is a JPEG of 2 columns × N rows of equal cells, so a notice can show what the job did at a glance.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from fusionfleet.errors import MediaError
from fusionfleet.media.decode import Image, iter_frames
from fusionfleet.media.probe import VideoInfo
from fusionfleet.media.ranges import RangeReader

PREVIEW_FRAMES = 4
CELL_MAX_WIDTH = 320
JPEG_QUALITY = 85


def sample_frames(frame_count: int, count: int = PREVIEW_FRAMES) -> tuple[int, ...]:
    """`count` frame numbers spread evenly over [0, frame_count), each in the middle of its share."""
    if frame_count <= 0:
        return ()
    count = min(count, frame_count)
    return tuple(sorted({(2 * i + 1) * frame_count // (2 * count) for i in range(count)}))


def cell_size(width: int, height: int, max_width: int = CELL_MAX_WIDTH) -> tuple[int, int]:
    """A cell's (width, height): the frame's shape, scaled down to at most `max_width` wide."""
    scale = min(1.0, max_width / width)
    return max(1, round(width * scale)), max(1, round(height * scale))


def contact_sheet(rows: Sequence[tuple[Image, Image]], cell: tuple[int, int]) -> Image:
    """One row per (before, after) pair, each picture fitted to `cell` (width, height)."""
    if not rows:
        raise ValueError("a contact sheet needs at least one row")
    width, height = cell

    def fit(image: Image) -> Image:
        if image.shape[1] == width and image.shape[0] == height:
            return image
        return np.asarray(cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA), dtype=np.uint8)

    return np.vstack([np.hstack([fit(before), fit(after)]) for before, after in rows])


def encode_jpeg(image: Image, quality: int = JPEG_QUALITY) -> bytes:
    ok, data = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise MediaError("the preview could not be encoded as JPEG")
    return bytes(data.tobytes())


def frame_at(reader: RangeReader, info: VideoInfo, index: int, what: str) -> Image:
    for _, image in iter_frames(reader, info, index, index + 1, what=what, threads=1):
        return image
    raise MediaError(f"{what}: frame {index} did not decode")


def render_preview(
    target: RangeReader,
    target_info: VideoInfo,
    output: RangeReader,
    output_info: VideoInfo,
    count: int = PREVIEW_FRAMES,
) -> tuple[bytes, tuple[int, int], tuple[int, ...]]:
    """The JPEG bytes, the sheet's (width, height) and the frame numbers it shows."""
    frames = sample_frames(min(target_info.frame_count, output_info.frame_count), count)
    if not frames:
        raise MediaError("the video has no frames to preview")
    cell = cell_size(*target_info.display_size)
    rows = [
        (frame_at(target, target_info, index, "target"), frame_at(output, output_info, index, "output"))
        for index in frames
    ]
    sheet = contact_sheet(rows, cell)
    return encode_jpeg(sheet), (int(sheet.shape[1]), int(sheet.shape[0])), frames
