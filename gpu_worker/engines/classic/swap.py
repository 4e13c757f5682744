"""Swapping one face: warp the source onto the target's landmarks, match colour, blend.

All work happens in a region of interest around the target face; the frame is written only through
an alpha that is zero outside the (eroded, feathered) face hull, so no pixel outside it changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from gpu_worker.engines.base import Image
from gpu_worker.engines.classic import blend, colour, warp
from gpu_worker.engines.classic.colour import LabStats
from gpu_worker.engines.classic.identity import SourceFace
from gpu_worker.engines.classic.landmarks import INNER_MOUTH, interocular, mouth_openness
from gpu_worker.engines.classic.presets import Blend, ColourMatch, Preset
from gpu_worker.engines.classic.warp import Points

# Features excluded from the skin statistics: their colours are not skin.
NON_SKIN = tuple(tuple(range(a, b)) for a, b in ((36, 42), (42, 48), (48, 60), (17, 22), (22, 27)))
ERODE = 0.08  # x inter-ocular: keeps the blend off the face outline, where source background lurks
OPEN_MOUTH = 0.06
MOUTH_FEATHER = 0.06  # x inter-ocular
LOCAL_SIGMA = 0.5  # x inter-ocular: wide enough for shading, too wide for features
LOCAL_STRENGTH = 0.6


@dataclass(frozen=True)
class SwapResult:
    frame: Image
    target_stats: LabStats | None
    """The (time-smoothed) target skin statistics used: pass them in for the next frame."""


def source_at_scale(source: SourceFace, eye_gap: float, sigma: float) -> tuple[Image, Points]:
    """The source brought to the target face's size and prefiltered by `sigma` target pixels.

    Bilinear remapping does not prefilter: minifying a detailed source by 2x or more aliases fine
    texture (wrinkles, hair), which then shimmers from frame to frame as the face moves. Even at
    the right size, bilinear sampling blurs more at half-pixel offsets than at whole ones; a slight
    prefilter makes that modulation (a visible "breathing" of detail) negligible.
    """
    factor = eye_gap / max(interocular(source.points), 1e-6)
    if factor >= 0.9:
        if sigma <= 0:
            return source.image, source.points
        blurred = cv2.GaussianBlur(source.image, (0, 0), sigma / factor)
        return np.asarray(blurred, dtype=np.uint8), source.points
    height, width = source.image.shape[:2]
    size = (max(1, round(width * factor)), max(1, round(height * factor)))
    small = cv2.resize(source.image, size, interpolation=cv2.INTER_AREA)
    # cv2.resize maps pixel centres: x_small = (x + 0.5) * (new size / old size) - 0.5.
    ratio = np.array([size[0] / width, size[1] / height], dtype=np.float32)
    points = ((source.points + 0.5) * ratio - 0.5).astype(np.float32)
    if sigma > 0:
        small = cv2.GaussianBlur(small, (0, 0), sigma)
    return np.asarray(small, dtype=np.uint8), points


def face_masks(target_points: Points, roi: warp.Roi, eye_gap: float) -> tuple[np.ndarray, np.ndarray]:
    """The eroded face hull and the skin (hull minus eyes, brows and lips), both 0/255 ROI masks."""
    hull = warp.polygon_mask(target_points, warp.hull_indices(len(target_points)), roi)
    size = max(1, round(ERODE * eye_gap))
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * size + 1, 2 * size + 1))
    hull = np.asarray(cv2.erode(hull, kernel), dtype=np.uint8)
    skin = hull.copy()
    for feature in NON_SKIN:
        skin[warp.polygon_mask(target_points, feature, roi) > 0] = 0
    return hull, skin


def swap_face(
    frame: Image,
    original: Image,
    source: SourceFace,
    landmarks: Points,
    *,
    preset: Preset,
    opacity: float,
    previous_stats: LabStats | None,
) -> SwapResult:
    """`frame` with the source face put onto the target face whose 68 `landmarks` are given.

    `original` is the untouched target frame (colour statistics come from it even when an earlier
    face was already swapped into `frame`); `opacity` scales the final blend (face_swapper_weight).
    """
    target_points = warp.extend_with_forehead(landmarks, preset.forehead)
    roi = warp.bounding_roi(target_points, 0.15, frame.shape)
    eye_gap = interocular(landmarks)
    if roi.empty or eye_gap < 4:
        return SwapResult(frame, None)
    texture, texture_points = source_at_scale(source, eye_gap, preset.texture_sigma)
    warped, inside = warp.warp_face(texture, texture_points, target_points, source.triangles, roi)
    hull, skin = face_masks(target_points, roi, eye_gap)
    # Where the warp is undefined inside the face (collapsed triangles: a closed source mouth on an
    # open target mouth) the target shows through, like its open mouth.
    holes = np.where((hull > 0) & ~inside, 255, 0).astype(np.uint8)
    skin[~inside] = 0
    if not hull.any():
        return SwapResult(frame, None)
    target_roi = original[roi.slices()]
    used_stats = None
    if preset.colour is not ColourMatch.NONE:
        warped, used_stats = colour.match_colour(
            warped,
            target_roi,
            skin,
            match_spread=preset.colour in (ColourMatch.LAB, ColourMatch.REGIONAL),
            local_sigma=LOCAL_SIGMA * eye_gap,
            local_strength=LOCAL_STRENGTH if preset.colour is ColourMatch.REGIONAL else 0.0,
            previous=previous_stats,
            memory=preset.colour_memory,
        )
    canvas = frame[roi.slices()]
    mouth = holes
    if preset.keep_target_mouth and mouth_openness(landmarks) > OPEN_MOUTH:
        mouth = np.maximum(mouth, warp.polygon_mask(landmarks, INNER_MOUTH, roi))
    clone_mask = hull
    if mouth.any():
        # The target's own mouth (and any collapsed part of the warp) is left out of the Poisson
        # mask, so it becomes the solver's boundary instead of smeared source pixels. One pixel of
        # growth covers where the triangle rasterisation overshoots the polygon.
        mouth = np.asarray(cv2.dilate(mouth, np.ones((3, 3), np.uint8)), dtype=np.uint8)
        clone_mask = np.where(mouth > 127, 0, hull).astype(np.uint8)
    if preset.blend is Blend.POISSON:
        warped = blend.poisson_blend(warped, canvas, clone_mask)
    alpha = blend.feathered_alpha(hull, preset.feather * eye_gap)
    if mouth.any():
        alpha = blend.cut_hole(alpha, mouth, max(1.0, MOUTH_FEATHER * eye_gap))
    alpha = (alpha * float(np.clip(opacity, 0.0, 1.0))).astype(np.float32)
    out = frame.copy()
    out[roi.slices()] = blend.composite(canvas, warped, alpha)
    return SwapResult(out, used_stats)
