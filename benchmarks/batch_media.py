"""The batch benchmark's inputs and its judge (benchmarks/batch.py).

Inputs: 40 different pictures (scikit-image's astronaut, shifted and cropped, as JPEG, PNG and WebP)
and 10 short stamped clips (3 to 7 s), generated from what the packages ship.

The judge decodes with OpenCV (its own FFmpeg build and image codecs, not the pipeline's ffmpeg) and
hashes the decoded pixels: an image is one hash, a clip one hash per frame in order. Two outputs are
identical when their hashes are; an output is its target's when it has the target's frame count and
size (the `copy` engine changes no pixel, so its frames are the target's, re-encoded).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from fleetctl.samples import astronaut, write_video

IMAGE_FORMATS = (".jpg", ".png", ".webp")
IMAGE_SIZE = (240, 180)  # width, height
CLIP_SIZE = (160, 120)


def write_inputs(folder: Path, images: int = 40, clips: int = 10) -> list[Path]:
    """`images` pictures and `clips` clips in `folder` (kept between runs), sorted by name."""
    folder.mkdir(parents=True, exist_ok=True)
    picture = astronaut()
    made = []
    for index in range(images):
        path = folder / f"photo-{index:02d}{IMAGE_FORMATS[index % len(IMAGE_FORMATS)]}"
        if not path.exists():
            # Each picture its own: a different shift and crop of the photo.
            shifted = np.roll(picture, index * 11, axis=1)[index * 3 : index * 3 + 400, :]
            resized = cv2.resize(np.ascontiguousarray(shifted), IMAGE_SIZE, interpolation=cv2.INTER_AREA)
            if not cv2.imwrite(str(path), resized):
                raise RuntimeError(f"could not write {path}")
        made.append(path)
    for index in range(clips):
        path = folder / f"clip-{index:02d}.mp4"
        if not path.exists():
            width, height = CLIP_SIZE
            write_video(path, seconds=3 + index % 5, fps=25, width=width, height=height, with_stamp=True)
        made.append(path)
    return sorted(made)


@dataclass(frozen=True)
class Decoded:
    """What the judge saw in a file: its size, and one hash per frame (one for an image)."""

    width: int
    height: int
    hashes: tuple[str, ...]

    @property
    def frames(self) -> int:
        return len(self.hashes)


def _digest(pixels: np.ndarray) -> str:
    return hashlib.sha256(pixels.tobytes() + str(pixels.shape).encode()).hexdigest()


def decode(path: Path) -> Decoded:
    """Decode `path` with OpenCV: every frame of a clip in order, or the picture. Raises on no pixels."""
    if path.suffix == ".mp4":
        capture = cv2.VideoCapture(str(path))
        hashes = []
        width = height = 0
        try:
            while True:
                ok, frame = capture.read()
                if not ok:
                    break
                height, width = frame.shape[:2]
                hashes.append(_digest(frame))
        finally:
            capture.release()
        if not hashes:
            raise ValueError(f"{path}: no frame decoded")
        return Decoded(width, height, tuple(hashes))
    image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if image is None:
        raise ValueError(f"{path}: not a picture OpenCV reads")
    return Decoded(image.shape[1], image.shape[0], (_digest(image),))


def compare(batch: Decoded, alone: Decoded, target: Decoded) -> str:
    """Why the batch's output differs from the one submitted alone, or is not its target's; "" when it is
    identical to it and has the target's frames and size. Pure."""
    if (batch.width, batch.height, batch.frames) != (target.width, target.height, target.frames):
        return (
            f"{batch.width}x{batch.height}, {batch.frames} frames; the target is "
            f"{target.width}x{target.height}, {target.frames} frames"
        )
    if batch.hashes != alone.hashes:
        differing = sum(1 for a, b in zip(batch.hashes, alone.hashes, strict=False) if a != b)
        return f"{differing} of {batch.frames} frames differ from the output of the target submitted alone"
    return ""
