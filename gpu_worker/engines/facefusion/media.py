"""FaceFusion's input and output files: our frames in, its frames back, nothing lost or reordered."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from fusionfleet.errors import InputRejected, MediaError
from fusionfleet.jobs.encoding import track_timescale
from fusionfleet.media.probe import open_video
from fusionfleet.media.ranges import FileRangeSource, RangeReader
from fusionfleet.media.runner import FramePipe
from fusionfleet.media.sniff import MOV
from gpu_worker.engines.base import EngineError, Frame, Image
from gpu_worker.engines.facefusion.failures import frame_count_reason

logger = logging.getLogger(__name__)

WRITE_TIMEOUT_S = 600.0
# A frame of another size than we gave is FaceFusion upscaling (frame_enhancer); one of another
# shape is a bug we must not paper over.
ASPECT_TOLERANCE = 0.01


@dataclass
class TargetVideo:
    """What was written for FaceFusion: the segment's frames, after `offset` frames of our own."""

    size: tuple[int, int]  # the frames' width and height
    padded: tuple[int, int]  # even, as FaceFusion's normalize_resolution makes every size
    offset: int = 0  # 1 when a reference image stands in front of the frames
    indices: list[int] = field(default_factory=list)
    emits: list[bool] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.indices)


def fps_fraction(fps: float) -> Fraction:
    return Fraction(fps).limit_denominator(1001)


def even_size(width: int, height: int) -> tuple[int, int]:
    return width + width % 2, height + height % 2


def pad_to(image: Image, size: tuple[int, int]) -> Image:
    """Repeat the last column/row up to an even size (cropped off again on the way back)."""
    width, height = size
    extra_y, extra_x = height - image.shape[0], width - image.shape[1]
    if not extra_x and not extra_y:
        return image
    return np.pad(image, ((0, extra_y), (0, extra_x), (0, 0)), mode="edge")


def letterbox(image: Image, size: tuple[int, int]) -> Image:
    """`image` scaled to fit `size`, centred on black: a reference picture as a video frame."""
    import cv2

    width, height = size
    scale = min(width / image.shape[1], height / image.shape[0])
    fitted_w, fitted_h = max(1, round(image.shape[1] * scale)), max(1, round(image.shape[0] * scale))
    fitted = cv2.resize(image, (fitted_w, fitted_h), interpolation=cv2.INTER_AREA)
    canvas = np.zeros((height, width, 3), dtype=np.uint8)
    top, left = (height - fitted_h) // 2, (width - fitted_w) // 2
    canvas[top : top + fitted_h, left : left + fitted_w] = fitted
    return canvas


def target_argv(path: Path, size: tuple[int, int], fps: Fraction) -> list[str]:
    """ffmpeg arguments for FaceFusion's target: lossless RGB H.264 in MOV, on an exact time grid.

    libx264rgb at qp 0 gives back the very BGR bytes FaceFusion's reader asks for; a keyframe each
    second keeps its seeks short; the track timescale makes every frame a whole number of ticks.
    """
    width, height = size
    keyint = max(1, round(fps))
    return [
        "-hide_banner", "-nostdin", "-loglevel", "error", "-y", "-protocol_whitelist", "pipe",
        "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", f"{width}x{height}",
        "-framerate", f"{fps.numerator}/{fps.denominator}", "-i", "pipe:0",
        "-an", "-c:v", "libx264rgb", "-qp", "0", "-preset", "ultrafast", "-pix_fmt", "bgr24",
        "-g", str(keyint), "-bf", "0", "-video_track_timescale", str(track_timescale(fps)),
        "-f", "mov", str(path),
    ]  # fmt: skip


def write_sources(sources: Sequence[Image], paths: Sequence[Path]) -> None:
    import cv2

    for image, path in zip(sources, paths, strict=True):
        if not cv2.imwrite(str(path), image):
            raise EngineError(f"could not write the source image {path.name} for FaceFusion")


def write_target(frames: Iterable[Frame], path: Path, fps: float, reference: Image | None) -> TargetVideo | None:
    """Stream the frames into FaceFusion's target video; None when there were no frames."""
    iterator = iter(frames)
    first = next(iterator, None)
    if first is None:
        return None
    height, width = first.image.shape[:2]
    target = TargetVideo(size=(width, height), padded=even_size(width, height))
    what = f"FaceFusion's input video {path.name}"
    try:
        with FramePipe(target_argv(path, target.padded, fps_fraction(fps)), what, WRITE_TIMEOUT_S) as pipe:
            if reference is not None:
                pipe.write(letterbox(reference, target.padded))
                target.offset = 1
            for frame in itertools.chain([first], iterator):
                if frame.image.shape != first.image.shape:
                    raise EngineError(
                        f"frame {frame.index} is {frame.image.shape}; the segment's first was {first.image.shape}"
                    )
                pipe.write(pad_to(frame.image, target.padded))
                target.indices.append(frame.index)
                target.emits.append(frame.emit)
    except MediaError as error:
        raise EngineError(f"could not write FaceFusion's input video: {error.reason}") from error
    return target


def _fit(image: Image, target: TargetVideo) -> Image:
    """FaceFusion's frame back at the size we gave it, without our padding."""
    out_w, out_h = image.shape[1], image.shape[0]
    padded_w, padded_h = target.padded
    if (out_w, out_h) != target.padded:
        if abs(out_w / out_h - padded_w / padded_h) > ASPECT_TOLERANCE * padded_w / padded_h:
            raise EngineError(f"FaceFusion returned {out_w}×{out_h} frames for a {padded_w}×{padded_h} target")
        import cv2

        image = np.asarray(cv2.resize(image, target.padded, interpolation=cv2.INTER_AREA), dtype=np.uint8)
    width, height = target.size
    return np.ascontiguousarray(image[:height, :width])


def _open(path: Path) -> av.container.InputContainer:
    what = f"FaceFusion's output video {path.name}"
    try:
        return open_video(RangeReader(FileRangeSource(path), what), MOV, what)
    except InputRejected as error:
        raise EngineError(f"FaceFusion's output cannot be read: {error.reason}") from error


def _packet_count(path: Path) -> int:
    with _open(path) as container:
        if not container.streams.video:
            return 0
        stream = container.streams.video[0]
        return int(stream.frames) or sum(1 for packet in container.demux(stream) if packet.size)


def read_output(path: Path, target: TargetVideo, log: str) -> Iterator[Image]:
    """FaceFusion's frames in order, checked to be exactly as many as it was given (else EngineError)."""
    expected = target.count
    # Count first, from the index: a short output fails before a single frame is handed on.
    counted = _packet_count(path)
    if counted != expected:
        raise EngineError(frame_count_reason(counted, expected, log))
    produced = 0
    with _open(path) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        try:
            for frame in container.decode(stream):
                if produced >= expected:
                    raise EngineError(frame_count_reason(produced + 1, expected, log))
                image: Image = frame.to_ndarray(format="bgr24")  # type: ignore[assignment]
                if produced == 0 and (image.shape[1], image.shape[0]) != target.padded:
                    logger.info("FaceFusion returned %sx%s frames; scaling them back to %sx%s",
                                image.shape[1], image.shape[0], *target.padded)  # fmt: skip
                yield _fit(image, target)
                produced += 1
        except av.FFmpegError as error:
            raise EngineError(f"FaceFusion's output does not decode after frame {produced}: {error}") from error
    if produced != expected:
        raise EngineError(frame_count_reason(produced, expected, log))
