"""Segments whose output is a picture: an image target, and a test render's frames.

An image target is one frame: decoded from its own bytes (the demuxer its first bytes name), shrunk
first when the job's output is smaller (FaceFusion's `restrict_image_resolution`), rendered, and kept
losslessly as PNG with its alpha plane (lowered by background_remover's matte where the job keeps it), for
the merge to write in the output's format and size.

A test render's frame k is rendered as the whole job renders it: the engine runs from the start of the
full-plan segment that holds k (`Segment.warm_from`), after the same lead-in, with the same `emit`
flags, then sees the frames after k that an engine looking ahead asks for (FaceFusion's tracker: its
`target_frame_amount`), as the full render's frame k sees the frames after it, and only frame k is kept
(fusionfleet.jobs.trial). The decoder seeks to the keyframe before the
lead-in; nothing of the video before it is read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from fusionfleet.adapters.storage import Storage
from fusionfleet.errors import SegmentFailed
from fusionfleet.media.decode import iter_frames
from fusionfleet.media.ffmpeg import file_input, global_args
from fusionfleet.media.image import decode_image
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.ranges import RangeReader
from fusionfleet.media.runner import run_ffmpeg
from fusionfleet.media.sniff import SNIFF_BYTES, image_format
from fusionfleet.messages import RenderTask
from gpu_worker.engines.base import Engine, EngineJob, Frame, Image
from gpu_worker.errors import Cancelled
from gpu_worker.rendering.frames import LEAD_IN_FRAMES
from gpu_worker.rendering.integrity import IntegrityWatch

STILL_SUFFIX = "png"
COPY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class StillStats:
    engine_s: float
    frames_fed: int  # frames the engine rendered for the one kept (a test render's warm-up included)


def still_path(workdir: Path, task: RenderTask) -> Path:
    return workdir / f"{task.segment.start_frame:07d}-{task.segment.end_frame:07d}.{STILL_SUFFIX}"


def engine_frames_of(task: RenderTask) -> int:
    """How many frames the engine renders for this still: what its time limit is sized on."""
    segment = task.segment
    if task.job.image is not None:
        return 1
    return segment.end_frame - max(0, segment.engine_start - LEAD_IN_FRAMES)


def render_still(
    engine: Engine,
    job: EngineJob,
    task: RenderTask,
    storage: Storage,
    reader: RangeReader,
    limits: MediaLimits,
    workdir: Path,
    cancel: threading.Event,
    what: str,
    lead_out: int = 0,
) -> StillStats:
    """Render the segment's one picture into `still_path(workdir, task)`; `lead_out`: frames after it the
    engine looks ahead to (fed, not kept)."""
    context = task.job
    alpha = None
    target_format = None
    if context.image is not None:
        lead_out = 0
        data = storage.get_bytes(context.target.bucket, context.target.key)
        picture, alpha = decode_image(data, f"target {context.target.key!r}", limits)
        target_format = image_format(data[:SNIFF_BYTES])
        work = context.image.work_size
        if target_format == "webp":
            picture, alpha = _copied_webp(data, work, workdir, what)
        if (picture.shape[1], picture.shape[0]) != work:
            picture = _resized(picture, work)
            alpha = None if alpha is None else _resized(alpha, work)
        frames: Iterator[Frame] = iter([Frame(index=0, image=picture, emit=True)])
    else:
        lead_out = max(0, min(lead_out, context.video.frame_count - task.segment.end_frame))
        frames = _warm_frames(reader, task, cancel, what, lead_out)
    wanted: list[Image] = []  # the input of the one frame kept, for the integrity check
    frames = _noting(frames, task.segment.start_frame, wanted)
    watch = IntegrityWatch()
    kept: Image | None = None
    fed = 0
    engine_s = 0.0
    outputs = engine.render(job, frames)
    while True:
        tick = time.monotonic()
        image = next(outputs, None)
        engine_s += time.monotonic() - tick
        if image is None:
            break
        fed += 1
        if fed == engine_frames_of(task):
            kept = image
    if kept is None or fed != engine_frames_of(task) + lead_out:
        raise SegmentFailed(
            f"{what}: engine {engine.name} returned {fed} frames for {engine_frames_of(task) + lead_out}"
        )
    if kept.ndim != 3 or kept.shape[2] != (4 if job.alpha else 3) or kept.dtype != np.uint8:
        raise SegmentFailed(f"{what}: engine {engine.name} returned a {kept.shape} {kept.dtype} picture")
    # A still has no neighbours: of the integrity checks only "black where the input is not" applies.
    watch.saw_input(wanted[0])
    watch.saw_output(kept)
    watch.check(what)
    if job.alpha:
        kept, alpha = kept[:, :, :3], matte_alpha(alpha, kept[:, :, 3])
    if target_format == "webp" and alpha is not None:
        kept = as_webp_temp(kept, alpha)
    _write_png(still_path(workdir, task), kept, alpha, what)
    return StillStats(engine_s=engine_s, frames_fed=fed)


def _noting(frames: Iterator[Frame], index: int, into: list[Image]) -> Iterator[Frame]:
    for frame in frames:
        if frame.index == index:
            into.append(frame.image)
        yield frame


def _warm_frames(
    reader: RangeReader, task: RenderTask, cancel: threading.Event, what: str, lead_out: int = 0
) -> Iterator[Frame]:
    """The full render's frames up to the wanted one (its segment's lead-in and start, with its `emit` flags),
    then `lead_out` frames after it, seen but not emitted."""
    segment, video = task.segment, task.job.video
    start = segment.engine_start
    last = segment.end_frame + lead_out
    for index, image in iter_frames(reader, video, max(0, start - LEAD_IN_FRAMES), last, what):
        if cancel.is_set():
            raise Cancelled(f"{what}: cancelled at frame {index}")
        yield Frame(index=index, image=image, emit=start <= index < segment.end_frame)


def matte_alpha(target: Image | None, matte: Image) -> Image | None:
    """The picture's alpha where the engine removed its background: the target's own alpha (an image's) lowered
    by the matte, as FaceFusion's background_remover takes the lower of the two (numpy.minimum.reduce); None
    where everything stays opaque (FaceFusion then writes no alpha: vision.conditional_merge_vision_mask)."""
    alpha = matte if target is None else np.minimum(target, matte)
    return None if bool((alpha == 255).all()) else np.ascontiguousarray(alpha, dtype=np.uint8)


def _copied_webp(data: bytes, size: tuple[int, int], workdir: Path, what: str) -> tuple[Image, Image | None]:
    """A WebP target as FaceFusion's copy_image leaves it for processing: written by FFmpeg at the size processed
    and quality 100 (set_image_quality: libwebp's lossy quality, so the picture is re-encoded lossily), then read
    as FaceFusion reads its temp image (cv2, with its alpha; FFmpeg cannot decode a lossy WebP with alpha)."""
    source, copy = workdir / "target.webp", workdir / "target-copy.webp"
    source.write_bytes(data)
    argv = [*global_args(), *file_input(source, "webp_pipe"), "-s", f"{size[0]}x{size[1]}", "-q:v", "100", str(copy)]
    run_ffmpeg(argv, COPY_TIMEOUT_S, f"{what}: the target's copy")
    image = cv2.imdecode(np.frombuffer(copy.read_bytes(), np.uint8), cv2.IMREAD_UNCHANGED)
    if image is None or image.ndim != 3 or image.shape[2] not in (3, 4):
        raise SegmentFailed(f"{what}: FFmpeg's copy of the WebP target could not be read back")
    alpha = image[:, :, 3] if image.shape[2] == 4 and bool((image[:, :, 3] < 255).any()) else None
    return np.ascontiguousarray(image[:, :, :3]), None if alpha is None else np.ascontiguousarray(alpha)


def as_webp_temp(picture: Image, alpha: Image) -> Image:
    """The colour FaceFusion's temp image keeps for a WebP target: cv2.imwrite writes it as lossless WebP, whose
    encoder (libwebp, `exact` off) blanks the colour of every fully transparent pixel; its output is made from that."""
    blanked = picture.copy()
    blanked[alpha == 0] = 0
    return blanked


def _resized(image: Image, size: tuple[int, int]) -> Image:
    return np.ascontiguousarray(cv2.resize(image, size, interpolation=cv2.INTER_CUBIC), dtype=np.uint8)


def _write_png(path: Path, picture: Image, alpha: Image | None, what: str) -> None:
    """Lossless, with the target's alpha plane where it had one (the engine renders colour only)."""
    if alpha is not None and alpha.shape[:2] != picture.shape[:2]:
        raise SegmentFailed(f"{what}: the picture is {picture.shape[1]}×{picture.shape[0]}, its alpha plane is not")
    pixels = picture if alpha is None else np.dstack([picture, alpha])
    ok, encoded = cv2.imencode(".png", pixels)
    if not ok:
        raise SegmentFailed(f"{what}: the rendered picture could not be written as PNG")
    path.write_bytes(encoded.tobytes())
