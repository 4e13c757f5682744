"""Sample media made from what installed packages ship, for the demo, the tests and the benchmarks.

The Grace Hopper portrait comes with matplotlib and the astronaut photo with scikit-image; both are
public domain. Moving "target" videos are made by panning, zooming and slightly rotating the
astronaut photo, so consecutive frames differ and a frame-alignment check can tell them apart.
Needs the `dev` extra (matplotlib, scikit-image, OpenCV).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

Image = npt.NDArray[np.uint8]

STAMP_BITS = 16


def grace_hopper_path() -> Path:
    import matplotlib

    path = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    if not path.is_file():
        raise FileNotFoundError(f"matplotlib's sample portrait is missing at {path}")
    return path


def grace_hopper() -> Image:
    """The Grace Hopper portrait as a BGR image (512×600)."""
    import cv2

    image = cv2.imread(str(grace_hopper_path()), cv2.IMREAD_COLOR)
    if image is None:
        raise FileNotFoundError(f"could not decode {grace_hopper_path()}")
    return np.ascontiguousarray(image)


def astronaut() -> Image:
    """scikit-image's astronaut photo as a BGR image (512×512)."""
    from skimage import data

    rgb = np.asarray(data.astronaut(), dtype=np.uint8)  # type: ignore[no-untyped-call]
    return np.ascontiguousarray(rgb[:, :, ::-1])


def _transform(t: float, width: int, height: int, side: int) -> npt.NDArray[np.float64]:
    """The affine map from the photo to output frame at time t: slow pan, zoom and a slight tilt."""
    import cv2

    # Keep the astronaut's face (around (230, 150) in the 512-pixel photo) inside the frame.
    face_x, face_y = 0.45 * side, 0.33 * side
    scale = (height / side) * 1.6 * (1.0 + 0.10 * math.sin(2 * math.pi * t / 6.0))
    angle = 4.0 * math.sin(2 * math.pi * t / 5.0)
    matrix = cv2.getRotationMatrix2D((face_x, face_y), angle, scale)
    # Pan: the face drifts across the middle third of the frame.
    centre_x = width * (0.5 + 0.15 * math.sin(2 * math.pi * t / 8.0))
    centre_y = height * (0.45 + 0.05 * math.cos(2 * math.pi * t / 7.0))
    matrix[0, 2] += centre_x - face_x
    matrix[1, 2] += centre_y - face_y
    return np.asarray(matrix, dtype=np.float64)


def stamp(image: Image, index: int) -> None:
    """Draw `index` as a row of black/white blocks in the bottom-left corner (in place).

    Blocks are large enough to survive lossy encoding, so a test can read back which source frame
    an output frame came from with `read_stamp`.
    """
    block = max(4, image.shape[0] // 45)
    for bit in range(STAMP_BITS):
        value = 255 if (index >> bit) & 1 else 0
        y0 = image.shape[0] - 2 * block
        x0 = block + bit * block
        image[y0 : y0 + block, x0 : x0 + block] = value


def read_stamp(image: Image) -> int:
    block = max(4, image.shape[0] // 45)
    index = 0
    for bit in range(STAMP_BITS):
        y0 = image.shape[0] - 2 * block
        x0 = block + bit * block
        patch = image[y0 + 1 : y0 + block - 1, x0 + 1 : x0 + block - 1]
        if float(patch.mean()) > 127:
            index |= 1 << bit
    return index


def astronaut_frames(
    count: int,
    width: int = 640,
    height: int = 360,
    fps: float = 25.0,
    with_stamp: bool = False,
) -> Iterator[Image]:
    """`count` BGR frames of a moving shot of the astronaut photo."""
    import cv2

    photo = astronaut()
    side = photo.shape[0]
    for index in range(count):
        matrix = _transform(index / fps, width, height, side)
        warped = cv2.warpAffine(photo, matrix, (width, height), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
        frame: Image = np.ascontiguousarray(warped, dtype=np.uint8)
        if with_stamp:
            stamp(frame, index)
        yield frame


def cut_shot_frames(count: int, cut: int, width: int = 960, height: int = 540) -> Iterator[Image]:
    """The moving astronaut alone until frame `cut`, then a cut to two people: Grace Hopper, larger, on
    the left, and the astronaut, smaller, on the right (FaceFusion's reference-mode case: a reference
    taken after the cut would be someone else)."""
    import cv2

    grace = grace_hopper()
    grace_width = round(grace.shape[1] * height / grace.shape[0])
    left = cv2.resize(grace, (grace_width, height), interpolation=cv2.INTER_AREA)
    side = min(width - grace_width, height)
    photo = cv2.resize(astronaut(), (side, side), interpolation=cv2.INTER_AREA)
    for index, whole in enumerate(astronaut_frames(count, width, height)):
        if index < cut:
            yield whole
            continue
        frame = np.full((height, width, 3), 40, np.uint8)
        frame[:, :grace_width] = left
        frame[height - side :, width - side :] = photo
        yield frame


def write_video(
    path: Path,
    seconds: float = 10.0,
    fps: int = 25,
    width: int = 640,
    height: int = 360,
    audio: bool = True,
    with_stamp: bool = False,
    crf: int = 18,
    frames: Iterable[Image] | None = None,
) -> Path:
    """Encode the moving astronaut shot (or `frames`; H.264, optional 440 Hz stereo AAC track) to an MP4 file."""
    from fusionfleet.media.runner import FramePipe

    count = round(seconds * fps)
    args = [
        "-hide_banner", "-nostdin", "-loglevel", "error", "-y",
        "-protocol_whitelist", "pipe",
        "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", f"{width}x{height}", "-framerate", str(fps), "-i", "pipe:0",
    ]  # fmt: skip
    if audio:
        args += ["-f", "lavfi", "-i", f"sine=frequency=440:sample_rate=48000:duration={count / fps}"]
        args += ["-map", "0:v", "-map", "1:a", "-c:a", "aac", "-b:a", "128k", "-ac", "2"]
    args += ["-c:v", "libx264", "-preset", "veryfast", "-crf", str(crf), "-pix_fmt", "yuv420p", "-g", str(fps * 2)]
    args += ["-movflags", "+faststart", "-f", "mp4", str(path)]
    with FramePipe(args, f"sample video {path.name}", timeout_s=600) as pipe:
        for frame in frames if frames is not None else astronaut_frames(count, width, height, fps, with_stamp):
            pipe.write(frame)
    return path
