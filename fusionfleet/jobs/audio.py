"""The output's audio: copied from the target, or re-encoded as a job's audio options say.

FaceFusion applies `output_audio_encoder`, `_quality` and `_volume` when it restores the target's
audio; the farm's merge does the same, with the same quality scales, so a job asks for the same
thing on one machine and on the fleet. With none of them set the target's audio is kept as it is
(copied), which is what a render farm's users expect of an untouched soundtrack.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

AUDIO_OPTIONS = ("output_audio_encoder", "output_audio_quality", "output_audio_volume")
# FaceFusion's encoders that an MP4 carries and common players play. FaceFusion also offers
# libvorbis and PCM, which FFmpeg will put in an MP4 that most players then refuse.
MP4_AUDIO_ENCODERS = ("aac", "libmp3lame", "libopus", "flac")
DEFAULT_AUDIO_ENCODER = "aac"
DEFAULT_AUDIO_QUALITY = 80  # FaceFusion's default
DEFAULT_AUDIO_VOLUME = 100


@dataclass(frozen=True)
class AudioSettings:
    """None: copy the target's audio. Otherwise every track is re-encoded with these."""

    encoder: str
    quality: int
    volume: int


def audio_settings(options: Mapping[str, object]) -> AudioSettings | None:
    """The job's audio settings, or None when it sets no audio option (the audio is copied)."""
    if not any(name in options for name in AUDIO_OPTIONS):
        return None
    return AudioSettings(
        encoder=str(options.get("output_audio_encoder", DEFAULT_AUDIO_ENCODER)),
        quality=int(str(options.get("output_audio_quality", DEFAULT_AUDIO_QUALITY))),
        volume=int(str(options.get("output_audio_volume", DEFAULT_AUDIO_VOLUME))),
    )


def audio_option_problems(options: Mapping[str, object]) -> list[str]:
    """The fleet's rule beyond FaceFusion's: the output is an MP4 that players play."""
    encoder = options.get("output_audio_encoder")
    if encoder is not None and str(encoder) not in MP4_AUDIO_ENCODERS:
        return [
            f"options.output_audio_encoder: {encoder!r} does not belong in an MP4 output that players play "
            f"(supported: {', '.join(MP4_AUDIO_ENCODERS)})"
        ]
    return []


def _interp(value: int, low: float, high: float) -> float:
    """numpy.interp over 0..100, as FaceFusion maps its quality percentages."""
    return low + (high - low) * max(0, min(100, value)) / 100


def audio_quality_args(encoder: str, quality: int) -> list[str]:
    """FaceFusion's quality scale per encoder (its ffmpeg_builder.set_audio_quality)."""
    if encoder == "aac":
        return ["-q:a", str(round(_interp(quality, 0.1, 2.0), 1))]
    if encoder == "libmp3lame":
        return ["-q:a", str(round(_interp(quality, 9, 0)))]
    if encoder == "libopus":
        return ["-b:a", f"{round(_interp(quality, 64, 256))}k"]
    return []  # flac is lossless: nothing to choose


def audio_encode_args(settings: AudioSettings) -> list[str]:
    """Encoder, quality and volume for every output audio track; volume 0 leaves silent tracks."""
    volume = [] if settings.volume == DEFAULT_AUDIO_VOLUME else ["-filter:a", f"volume={settings.volume / 100}"]
    return ["-c:a", settings.encoder, *audio_quality_args(settings.encoder, settings.quality), *volume]
