"""Which GPU media this worker can use, probed once at start; the CPU otherwise, said in one log line.

NVDEC is used for decoding only when it decodes a probe clip to exactly the CPU decoder's frames, bit
for bit (so a segment decodes alike on every worker and re-renders stay byte-identical). NVENC is not
this worker's choice: a job's encoder is fixed at planning (fusionfleet/media/gpu_media.py); the probe
says whether this worker can serve NVENC jobs, and an NVENC job on a worker that cannot fails its
attempt here as the worker's fault (another worker renders it) instead of mixing encoders in one job.
Both probes need an NVIDIA device; without one they are skipped at once.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from fusionfleet.jobs.encoding import encoder_settings
from fusionfleet.media.decode import iter_frames
from fusionfleet.media.ffmpeg import encode_segment_argv
from fusionfleet.media.inspect import summarize
from fusionfleet.media.limits import MediaLimits
from fusionfleet.media.probe import probe_video
from fusionfleet.media.ranges import FileRangeSource, RangeReader
from fusionfleet.media.runner import FramePipe
from gpu_worker.engines.base import Image

logger = logging.getLogger(__name__)

PROBE_FRAMES = 24
PROBE_SIZE = (320, 240)
NVIDIA_DEVICE = Path("/dev/nvidiactl")


@dataclass(frozen=True)
class GpuMedia:
    """What this worker decodes and encodes on the GPU; the reasons say why not where it does not."""

    decode: bool = False
    encode: bool = False
    decode_why: str = "not probed"
    encode_why: str = "not probed"

    def hwaccel(self) -> Any:
        """PyAV's hardware decoder to open videos with (None: the CPU's)."""
        if not self.decode:
            return None
        from av.codec.hwaccel import HWAccel

        return HWAccel("cuda", allow_software_fallback=False)

    def describe(self) -> str:
        decode = "NVDEC" if self.decode else f"CPU ({self.decode_why})"
        encode = "NVENC jobs served" if self.encode else f"no NVENC jobs ({self.encode_why})"
        return f"decoding on {decode}; {encode}"


def has_nvidia_device() -> bool:
    return NVIDIA_DEVICE.exists() or shutil.which("nvidia-smi") is not None


def probe_frames(count: int = PROBE_FRAMES, size: tuple[int, int] = PROBE_SIZE) -> list[Image]:
    """Moving, detailed frames (gradients and a moving square), made here: no media file needed. Pure."""
    width, height = size
    y, x = np.mgrid[0:height, 0:width]
    frames = []
    for number in range(count):
        image = np.stack([(x + 3 * number) % 256, (y + 5 * number) % 256, (x * y // 64 + number) % 256], axis=-1)
        left = (7 * number) % (width - 40)
        image[40:80, left : left + 40] = (250, 20, 120)
        frames.append(np.ascontiguousarray(image.astype(np.uint8)))
    return frames


def write_clip(path: Path, frames: list[Image], codec_device: str = "cpu") -> Path:
    """`frames` encoded with the fleet's own encoder argv (x264, or NVENC with `codec_device="nvenc"`)."""
    height, width = frames[0].shape[:2]
    settings = encoder_settings(width, height, Fraction(25), {}, len(frames), device=codec_device)
    with FramePipe(encode_segment_argv(width, height, settings, path), f"probe clip {path.name}", 60) as pipe:
        for frame in frames:
            pipe.write(frame)
    return path


def decode_clip(path: Path, hwaccel: Any = None) -> list[Image]:
    info = probe_video(RangeReader(FileRangeSource(path), "probe"), "probe", MediaLimits())
    reader = RangeReader(FileRangeSource(path), "probe")
    return [image for _, image in iter_frames(reader, info, 0, info.frame_count, "probe", hwaccel=hwaccel)]


def same_frames(expected: list[Image], got: list[Image]) -> str | None:
    """Why two decodes differ (count, first differing frame and by how much), or None. Pure."""
    if len(expected) != len(got):
        return f"{len(got)} frames decoded, {len(expected)} by the CPU"
    for number, (a, b) in enumerate(zip(expected, got, strict=True)):
        if a.shape != b.shape:
            return f"frame {number} is {b.shape}, {a.shape} from the CPU"
        if not np.array_equal(a, b):
            worst = int(np.abs(a.astype(np.int16) - b.astype(np.int16)).max())
            return f"frame {number} differs from the CPU's decode (by up to {worst} levels)"
    return None


def probe_nvdec(folder: Path, hwaccel: Callable[[], Any] = GpuMedia(decode=True).hwaccel) -> str | None:
    """None when the GPU decodes a probe clip to the CPU decoder's frames exactly; else why not."""
    clip = write_clip(folder / "nvdec-probe.mp4", probe_frames())
    try:
        return same_frames(decode_clip(clip), decode_clip(clip, hwaccel()))
    except Exception as error:
        return f"decoding on the GPU failed: {error}"


def probe_nvenc(folder: Path) -> str | None:
    """None when the job's NVENC argv encodes a probe clip with every frame; else why not."""
    try:
        clip = write_clip(folder / "nvenc-probe.mp4", probe_frames(), codec_device="nvenc")
        frames = summarize(clip).frame_count
    except Exception as error:
        return f"encoding with NVENC failed: {error}"
    return None if frames == PROBE_FRAMES else f"NVENC wrote {frames} frames of {PROBE_FRAMES}"


def probe_gpu_media(scratch: Path, device_present: Callable[[], bool] = has_nvidia_device) -> GpuMedia:
    """What this worker can do on the GPU, probed now (about a second with a GPU, nothing without)."""
    if not device_present():
        media = GpuMedia(decode_why="no NVIDIA device", encode_why="no NVIDIA device")
    else:
        scratch.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="media-probe-", dir=scratch) as folder:
            decode_problem = probe_nvdec(Path(folder))
            encode_problem = probe_nvenc(Path(folder))
        media = GpuMedia(
            decode=decode_problem is None,
            encode=encode_problem is None,
            decode_why=decode_problem or "",
            encode_why=encode_problem or "",
        )
    logger.info("GPU media: %s", media.describe())
    return media
