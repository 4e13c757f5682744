"""The alpha planes of two renders compared: background_remover's matte, where FaceFusion writes it (VP9 in
yuva420p, fusionfleet.facefusion.requirements.video_keeps_alpha).

FFmpeg's own VP9 decoder drops the alpha; libvpx's reads it. Both sides are decoded with FaceFusion's FFmpeg
(the harness's static build), not the farm's. A render without alpha (its stream carries no ALPHA_MODE) has
none to compare: both without is equal, one without is a difference.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import numpy.typing as npt

from fleetctl.harness.facefusion import binaries_dir

# Two encodes of the same matte by the same libvpx at the same CRF: measured identical; a level of rounding spare.
MAX_MEAN_LEVELS = 1.0


def has_alpha(path: Path) -> bool:
    """The video stream says it carries alpha (Matroska's ALPHA_MODE, as libvpx-vp9 writes it)."""
    argv = [str(binaries_dir() / "ffprobe"), "-v", "error", "-select_streams", "v:0",
            "-show_entries", "stream_tags", "-of", "json", str(path)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120)
    streams = json.loads(done.stdout).get("streams") or [{}]
    tags = {name.upper(): value for name, value in (streams[0].get("tags") or {}).items()}
    return tags.get("ALPHA_MODE") == "1"


def alpha_planes(path: Path) -> npt.NDArray[np.uint8]:
    """Every frame's alpha, decoded with libvpx: frames × height × width."""
    probe = [str(binaries_dir() / "ffprobe"), "-v", "error", "-select_streams", "v:0",
             "-show_entries", "stream=width,height", "-of", "json", str(path)]  # fmt: skip
    stream = json.loads(subprocess.run(probe, capture_output=True, text=True, check=True, timeout=120).stdout)
    width, height = int(stream["streams"][0]["width"]), int(stream["streams"][0]["height"])
    argv = [str(binaries_dir() / "ffmpeg"), "-v", "error", "-c:v", "libvpx-vp9", "-i", str(path),
            "-vf", "alphaextract", "-f", "rawvideo", "-pix_fmt", "gray", "-"]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, check=True, timeout=600).stdout
    return np.frombuffer(out, np.uint8).reshape(-1, height, width)


def compare_alpha(reference: Path, candidate: Path) -> list[str]:
    """The differences between two renders' alpha, in words (none: equal)."""
    theirs, ours = has_alpha(reference), has_alpha(candidate)
    if not theirs and not ours:
        return []
    if theirs != ours:
        return [f"alpha: FaceFusion's output {'has' if theirs else 'has no'} alpha, the farm's "
                f"{'has' if ours else 'has none'}"]  # fmt: skip
    first, second = alpha_planes(reference), alpha_planes(candidate)
    if first.shape != second.shape:
        return [f"alpha: {first.shape} planes against {second.shape}"]
    difference = np.abs(first.astype(np.int16) - second.astype(np.int16))
    per_frame = difference.reshape(len(difference), -1).mean(axis=1)
    worst = int(per_frame.argmax()) if len(per_frame) else 0
    if len(per_frame) and float(per_frame[worst]) > MAX_MEAN_LEVELS:
        return [f"alpha: frame {worst} differs by {float(per_frame[worst]):.2f} levels on average "
                f"(at most {MAX_MEAN_LEVELS})"]  # fmt: skip
    return []
