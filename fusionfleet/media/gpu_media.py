"""GPU media: the NVENC encoders a job may be given, chosen once per job at planning. Pure.

A job's segments are joined by stream copy, so every segment of a job must come from the same encoder
with the same settings: CPU workers cannot produce NVENC's stream, and NVENC's differs from x264's. The
encoder is therefore a property of the job (its EncoderSettings), decided by the slicer from the
fleet's declared encoder device (`VIDEO_ENCODER_DEVICE`): `nvenc` on a fleet whose every render worker
runs the GPU image with the video driver capability (proved by `make device-check`), `cpu` (the
default) everywhere else. A worker given an NVENC job without a working NVENC fails the attempt as its
own fault, never falls back to x264 for one segment. Decoding is different: NVDEC's frames are the
CPU decoder's bit for bit or it is not used (gpu_worker/rendering/media_probe.py), so each worker chooses alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

ENCODER_DEVICES = ("cpu", "nvenc")
# The NVENC encoder for each CPU encoder a job may name (the same codec, profile and pixel format).
NVENC_FOR: Mapping[str, str] = MappingProxyType({"libx264": "h264_nvenc", "libx265": "hevc_nvenc"})
NVENC_CODECS = frozenset(NVENC_FOR.values())
# x264's speed presets mapped to NVENC's p1 (fastest) … p7 (best).
NVENC_PRESETS: Mapping[str, str] = MappingProxyType(
    {
        "ultrafast": "p1", "superfast": "p2", "veryfast": "p3", "faster": "p3", "fast": "p4", "medium": "p5",
        "slow": "p6", "slower": "p7", "veryslow": "p7",
    }
)  # fmt: skip


def is_nvenc(codec: str) -> bool:
    return codec in NVENC_CODECS


def cpu_codec(codec: str) -> str:
    """The CPU encoder whose profile and pixel format an NVENC encoder shares (itself for a CPU one)."""
    for cpu, gpu in NVENC_FOR.items():
        if gpu == codec:
            return cpu
    return codec


def job_codec(named: str | None, default: str, device: str) -> str:
    """The encoder of a job: the one it names, else the fleet's default on the fleet's device. Pure.

    A job that names an encoder gets it (x264 named is x264, on any fleet); one that names none gets the
    default, as NVENC on an `nvenc` fleet.
    """
    if device not in ENCODER_DEVICES:
        raise ValueError(f"unknown encoder device {device!r} (one of {', '.join(ENCODER_DEVICES)})")
    if named is not None:
        return named
    return NVENC_FOR.get(default, default) if device == "nvenc" else default


def nvenc_preset(preset: str) -> str:
    return NVENC_PRESETS.get(preset, "p5")
