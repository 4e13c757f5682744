"""The parity tool's judge: two renders of one target compared frame by frame, in time, in sound, in colour.

Equal means: the same size and frame count, every frame at least PSNR_GOAL dB from its counterpart,
video and container durations within one frame, the same audio tracks (codec, rate, channels) whose
first track's samples agree (lengths within one AAC frame, SNR at least AUDIO_SNR_GOAL dB), and the
same colour tags. Anything else is a difference, said in words. Pure but for reading the two files.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.parity import media

PSNR_GOAL = 40.0
IDENTICAL = 100.0  # the PSNR reported for frames with no difference at all (it is infinite)
AUDIO_FRAME = 1024  # samples in an AAC frame: the tolerance on an audio track's length
AUDIO_SNR_GOAL = 40.0
WORST_LISTED = 5


def psnr(first: media.Image, second: media.Image) -> float:
    error = float(np.mean((first.astype(np.float64) - second.astype(np.float64)) ** 2))
    return IDENTICAL if error == 0 else min(IDENTICAL, 10 * math.log10(255.0**2 / error))


def snr(reference: npt.NDArray[np.float32], other: npt.NDArray[np.float32]) -> float:
    noise = float(np.mean((reference.astype(np.float64) - other.astype(np.float64)) ** 2))
    signal = float(np.mean(reference.astype(np.float64) ** 2))
    return IDENTICAL if noise == 0 else min(IDENTICAL, 10 * math.log10(max(signal, 1e-20) / noise))


@dataclass
class Verdict:
    equal: bool
    frames: list[int]  # [FaceFusion's, the farm's]
    min_psnr: float | None
    audio: dict[str, Any]
    differences: list[str]
    median_psnr: float | None = None
    worst_frames: list[tuple[int, float]] = field(default_factory=list)
    size: list[list[int]] = field(default_factory=list)
    duration_s: list[float] = field(default_factory=list)
    colour: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge(reference: Path, farm: Path) -> Verdict:
    """`reference`: FaceFusion's own render; `farm`: the farm's."""
    ours, theirs = media.probe(reference), media.probe(farm)
    differences: list[str] = []
    if (ours.width, ours.height) != (theirs.width, theirs.height):
        differences.append(f"size: FaceFusion {ours.width}×{ours.height}, the farm {theirs.width}×{theirs.height}")
    first, second = media.frames(reference), media.frames(farm)
    if len(first) != len(second):
        differences.append(f"frame count: FaceFusion {len(first)}, the farm {len(second)}")
    scores = [psnr(a, b) for a, b in zip(first, second, strict=False) if a.shape == b.shape]
    worst = sorted(enumerate(scores), key=lambda item: item[1])[:WORST_LISTED]
    below = [(index, score) for index, score in worst if score < PSNR_GOAL]
    if below:
        count = sum(score < PSNR_GOAL for score in scores)
        listed = ", ".join(f"{index} ({score:.1f} dB)" for index, score in below)
        differences.append(f"{count} of {len(scores)} frames below {PSNR_GOAL:g} dB PSNR, the worst: {listed}")
    frame_s = 1 / ours.fps if ours.fps else 0.04
    for what, a, b in (
        ("video duration", ours.video_duration_s, theirs.video_duration_s),
        ("container duration", ours.format_duration_s, theirs.format_duration_s),
    ):
        if abs(a - b) > frame_s + 1e-6:
            differences.append(f"{what}: FaceFusion {a:.3f} s, the farm {b:.3f} s")
    changed = [key for key in media.COLOUR_KEYS if ours.colour[key] != theirs.colour[key]]
    if changed:
        said = ", ".join(f"{key} {ours.colour[key]} / {theirs.colour[key]}" for key in changed)
        differences.append(f"colour tags (FaceFusion / the farm): {said}")
    audio = compare_audio(reference, farm, ours, theirs, differences)
    return Verdict(
        equal=not differences,
        frames=[len(first), len(second)],
        min_psnr=round(min(scores), 2) if scores else None,
        audio=audio,
        differences=differences,
        median_psnr=round(statistics.median(scores), 2) if scores else None,
        worst_frames=[(index, round(score, 2)) for index, score in worst],
        size=[[ours.width, ours.height], [theirs.width, theirs.height]],
        duration_s=[round(ours.format_duration_s, 4), round(theirs.format_duration_s, 4)],
        colour=[ours.colour, theirs.colour],
    )


def compare_audio(
    reference: Path, farm: Path, ours: media.Probe, theirs: media.Probe, differences: list[str]
) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "tracks": [len(ours.audio), len(theirs.audio)],
        "codecs": [[track.codec for track in ours.audio], [track.codec for track in theirs.audio]],
    }
    if len(ours.audio) != len(theirs.audio):
        differences.append(f"audio tracks: FaceFusion {len(ours.audio)}, the farm {len(theirs.audio)}")
    if not ours.audio or not theirs.audio:
        return facts
    a, b = ours.audio[0], theirs.audio[0]
    for what, x, y in (("codec", a.codec, b.codec), ("sample rate", a.sample_rate, b.sample_rate),
                       ("channels", a.channels, b.channels)):  # fmt: skip
        if x != y:
            differences.append(f"audio {what}: FaceFusion {x}, the farm {y}")
    first = media.audio_samples(reference, 0, a.channels)
    second = media.audio_samples(farm, 0, b.channels)
    facts["samples"] = [int(first.shape[0]), int(second.shape[0])]
    if abs(first.shape[0] - second.shape[0]) > AUDIO_FRAME:
        differences.append(
            f"audio length: FaceFusion {first.shape[0]} samples, the farm {second.shape[0]}"
            " (more than one AAC frame apart)"
        )
    if first.shape[1] == second.shape[1]:
        length = min(first.shape[0], second.shape[0])
        facts["snr_db"] = round(snr(first[:length], second[:length]), 2) if length else None
        if length and facts["snr_db"] < AUDIO_SNR_GOAL:
            differences.append(f"audio samples: SNR {facts['snr_db']:.1f} dB (goal ≥ {AUDIO_SNR_GOAL:g} dB)")
    return facts
