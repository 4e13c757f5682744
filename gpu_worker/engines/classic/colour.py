"""Adaptive colour matching of the warped source face to the target's skin.

Two stages, both in CIE LAB: a global transfer of the skin's mean and spread (lighting level, white
balance, tan), then an optional low-frequency correction: the difference between heavily blurred
target and source skin, which carries the target's directional lighting (a lit left cheek, a shadowed
right one) region by region. The blur is wide enough to carry shading but not features.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

FloatImage = npt.NDArray[np.float32]
Mask = npt.NDArray[np.uint8]

MIN_SKIN_PIXELS = 32
# Spread ratios beyond these would amplify noise (or flatten texture) rather than match skin.
STD_RATIO_LIMITS = (0.6, 1.6)


@dataclass(frozen=True)
class LabStats:
    mean: npt.NDArray[np.float32]
    std: npt.NDArray[np.float32]


def to_lab(image: npt.NDArray[np.uint8]) -> FloatImage:
    """Float LAB (L in 0..100) so that arithmetic does not clip."""
    return np.asarray(cv2.cvtColor(image.astype(np.float32) / 255.0, cv2.COLOR_BGR2LAB), dtype=np.float32)


def from_lab(lab: FloatImage) -> npt.NDArray[np.uint8]:
    bgr = cv2.cvtColor(lab.astype(np.float32), cv2.COLOR_LAB2BGR)
    return np.asarray(np.clip(bgr * 255.0 + 0.5, 0, 255), dtype=np.uint8)


def lab_stats(lab: FloatImage, mask: Mask) -> LabStats | None:
    selected = lab[mask > 0]
    if len(selected) < MIN_SKIN_PIXELS:
        return None
    return LabStats(
        mean=selected.mean(axis=0).astype(np.float32),
        std=(selected.std(axis=0) + 1e-3).astype(np.float32),
    )


def blend_stats(previous: LabStats | None, current: LabStats, keep: float) -> LabStats:
    """Exponential smoothing of target statistics over time, so the face's colour cannot flicker."""
    if previous is None:
        return current
    return LabStats(
        mean=(keep * previous.mean + (1 - keep) * current.mean).astype(np.float32),
        std=(keep * previous.std + (1 - keep) * current.std).astype(np.float32),
    )


def transfer_stats(lab: FloatImage, source: LabStats, target: LabStats, match_spread: bool) -> FloatImage:
    """Move `lab`'s statistics from `source` to `target` (Reinhard-style colour transfer)."""
    ratio = np.ones(3, dtype=np.float32)
    if match_spread:
        ratio = np.clip(target.std / source.std, *STD_RATIO_LIMITS).astype(np.float32)
    return ((lab - source.mean) * ratio + target.mean).astype(np.float32)


def _masked_blur(channel_stack: FloatImage, weight: FloatImage, sigma: float) -> FloatImage:
    """Gaussian blur that ignores pixels with zero weight (normalised convolution)."""
    size = (0, 0)
    numerator = cv2.GaussianBlur(channel_stack * weight[..., None], size, sigma)
    denominator = cv2.GaussianBlur(weight, size, sigma)[..., None]
    return np.asarray(numerator / np.maximum(denominator, 1e-4), dtype=np.float32)


def low_frequency_correction(
    source_lab: FloatImage, target_lab: FloatImage, skin: Mask, sigma: float, strength: float
) -> FloatImage:
    """Per-pixel offset adding the target's broad shading to the (already matched) source."""
    weight = (skin > 0).astype(np.float32)
    difference = _masked_blur(target_lab - source_lab, weight, sigma)
    return (difference * strength).astype(np.float32)


def match_colour(
    warped: npt.NDArray[np.uint8],
    target: npt.NDArray[np.uint8],
    skin: Mask,
    *,
    match_spread: bool,
    local_sigma: float,
    local_strength: float,
    previous: LabStats | None = None,
    memory: float = 0.0,
) -> tuple[npt.NDArray[np.uint8], LabStats | None]:
    """`warped` recoloured to the target's skin, and the target statistics it was matched to.

    `skin` marks pixels that are skin in both images (they are aligned, so one mask serves both).
    `previous` (the statistics returned for the last frame) is blended in with weight `memory`.
    """
    warped_lab = to_lab(warped)
    target_lab = to_lab(target)
    source = lab_stats(warped_lab, skin)
    measured = lab_stats(target_lab, skin)
    wanted = blend_stats(previous, measured, memory) if measured is not None else previous
    if source is None or wanted is None:
        return warped, wanted
    matched = transfer_stats(warped_lab, source, wanted, match_spread)
    if local_strength > 0 and local_sigma > 0:
        matched = matched + low_frequency_correction(matched, target_lab, skin, local_sigma, local_strength)
    return from_lab(matched), wanted
