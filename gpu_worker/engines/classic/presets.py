"""Quality presets: which post-processing runs, traded against speed.

`realtime` feathers instead of Poisson-blending, matches only the mean colour, re-fits landmarks
from the last position instead of following them with optical flow and detects at the detector's own
scale (faces from about 80 pixels); `balanced` adds optical flow, Poisson blending, full LAB matching
with regional shading and detects upsampled once (faces down to about 40 pixels: people in a group or
in the distance); `cinema` detects twice as often and smooths with a constant-velocity Kalman filter.
All three smooth landmarks over time (motion-compensated, see `smoothing.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from gpu_worker.engines.base import QUALITY_PRESETS, EngineError
from gpu_worker.engines.classic.smoothing import KalmanParams, OneEuroParams


class Blend(StrEnum):
    FEATHER = "feather"
    POISSON = "poisson"


class ColourMatch(StrEnum):
    NONE = "none"
    MEAN = "mean"
    """LAB mean only (brightness and white balance)."""
    LAB = "lab"
    """LAB mean and spread."""
    REGIONAL = "regional"
    """LAB mean and spread plus the target's low-frequency shading."""


class Smoothing(StrEnum):
    NONE = "none"
    ONE_EURO = "one-euro"
    KALMAN = "kalman"


@dataclass(frozen=True)
class Preset:
    name: str
    detect_interval: int
    """Frames between full-frame detections (tracked faces are followed in between)."""
    detect_height: int
    """Frames are shrunk towards this height for detection (faces are kept ≥ 80 px)."""
    detect_upsample: int
    """dlib upsampling steps: 1 finds faces down to 40 px at four times the cost."""
    optical_flow: bool
    """Follow landmarks with pyramidal Lucas-Kanade between frames (else re-fit from last box)."""
    flow_correction: float
    """Share of the per-frame landmark fit blended into the flow-tracked points (anti-drift)."""
    smoothing: Smoothing
    colour: ColourMatch
    blend: Blend
    feather: float
    """Feather width as a share of the inter-ocular distance."""
    forehead: float = 0.3
    """Forehead lift above the brows as a share of the chin-to-bridge distance."""
    texture_sigma: float = 0.7
    """Prefilter of the source texture (target pixels) against aliasing and detail shimmer."""
    keep_target_mouth: bool = True
    """Show the target's open mouth (teeth, tongue) through the swapped lips."""
    colour_memory: float = 0.8
    """Exponential smoothing of the target's skin statistics between frames (0: none)."""
    one_euro: OneEuroParams = field(default_factory=OneEuroParams)
    kalman: KalmanParams = field(default_factory=KalmanParams)


PRESETS: MappingProxyType[str, Preset] = MappingProxyType(
    {
        "realtime": Preset(
            name="realtime",
            detect_interval=12,
            detect_height=360,
            detect_upsample=0,
            optical_flow=False,
            flow_correction=0.35,
            smoothing=Smoothing.ONE_EURO,
            colour=ColourMatch.MEAN,
            blend=Blend.FEATHER,
            feather=0.3,
            colour_memory=0.6,
            one_euro=OneEuroParams(min_cutoff=1.5, beta=0.7),
        ),
        "balanced": Preset(
            name="balanced",
            detect_interval=6,
            detect_height=360,
            detect_upsample=1,
            optical_flow=True,
            flow_correction=0.25,
            smoothing=Smoothing.ONE_EURO,
            colour=ColourMatch.REGIONAL,
            blend=Blend.POISSON,
            feather=0.25,
            one_euro=OneEuroParams(min_cutoff=1.0, beta=0.5),
        ),
        "cinema": Preset(
            name="cinema",
            detect_interval=3,
            detect_height=360,
            detect_upsample=1,
            optical_flow=True,
            flow_correction=0.2,
            smoothing=Smoothing.KALMAN,
            colour=ColourMatch.REGIONAL,
            blend=Blend.POISSON,
            feather=0.3,
            colour_memory=0.9,
            kalman=KalmanParams(process_noise=0.3, measurement_noise=0.01),
        ),
    }
)


def preset_for(quality: str) -> Preset:
    try:
        return PRESETS[quality]
    except KeyError:
        raise EngineError(f"unknown quality {quality!r}; choose one of {', '.join(QUALITY_PRESETS)}") from None
