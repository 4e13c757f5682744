"""Limits on user media, checked from the probe and again while decoding. Settings with defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MediaLimits:
    max_width: int = 3840
    max_height: int = 2160
    max_fps: float = 120.0
    max_duration_s: float = 3 * 3600.0
    max_bytes: int = 4 * 1024**3
    max_image_bytes: int = 25 * 1024**2
    max_image_pixels: int = 40_000_000
    probe_timeout_s: float = 60.0

    @property
    def max_frames(self) -> int:
        return int(self.max_fps * self.max_duration_s)
