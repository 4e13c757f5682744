"""68-point landmarks from dlib's shape predictor, and checks that a detection really is a face.

The plausibility check exploits how a cascade shape predictor behaves: on a real face its landmarks
lock onto the eyes, nose and mouth, so nudging the box barely moves them; on a false positive (a
patch, a logo) there is nothing to lock onto and the landmarks follow the box.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from gpu_worker.engines.classic.detect import Box, to_dlib_rect
from gpu_worker.engines.classic.warp import Points

LEFT_EYE = slice(36, 42)
RIGHT_EYE = slice(42, 48)
INNER_MOUTH = tuple(range(60, 68))
# Box size / RMS landmark radius and box centre offset (in radii), measured on dlib's own detections.
BOX_PER_RADIUS = 2.68
BOX_CENTRE_DY = -0.04
# Evidence = detector score - ANCHORING_WEIGHT x anchoring. Measured on the sample photos at five
# scales: real faces score 0.5..1.5 with anchoring 0..0.75 (evidence >= 0.16); false positives
# (suit patch, badge, helmet) score -0.5..0.2 with anchoring 0.45..1.4 (evidence <= -0.4).
ANCHORING_WEIGHT = 0.5
NUDGES = ((0.08, 0.0, 1.0), (-0.08, 0.0, 1.0), (0.0, 0.08, 1.0), (0.0, -0.08, 1.0), (0.0, 0.0, 1.12))


def predict_landmarks(predictor: Any, gray: npt.NDArray[np.uint8], box: Box) -> Points:
    shape = predictor(gray, to_dlib_rect(box))
    return np.array([(part.x, part.y) for part in shape.parts()], dtype=np.float32)


def eye_centres(points: Points) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    return points[LEFT_EYE].mean(axis=0), points[RIGHT_EYE].mean(axis=0)


def interocular(points: Points) -> float:
    left, right = eye_centres(points)
    return float(np.hypot(*(right - left)))


def box_from_landmarks(points: Points) -> Box:
    """A detector-like box around landmarks, so the predictor can be re-run on tracked points."""
    centre = points[:68].mean(axis=0)
    radius = float(np.sqrt(((points[:68] - centre) ** 2).sum(axis=1).mean()))
    half = 0.5 * BOX_PER_RADIUS * radius
    cx, cy = float(centre[0]), float(centre[1]) + BOX_CENTRE_DY * radius
    return (cx - half, cy - half, cx + half, cy + half)


def anchoring(
    predictor: Any,
    gray: npt.NDArray[np.uint8],
    box: Box,
    points: Points,
    nudges: tuple[tuple[float, float, float], ...] = NUDGES,
) -> float:
    """Median landmark shift per unit of box shift over a few nudges (≈0 for a real face)."""
    width = box[2] - box[0]
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    ratios = []
    for dx, dy, scale in nudges:
        half = width * scale / 2
        nudged = (
            cx + dx * width - half,
            cy + dy * width - half,
            cx + dx * width + half,
            cy + dy * width + half,
        )
        moved = predict_landmarks(predictor, gray, nudged)
        box_shift = float(np.hypot(dx, dy)) * width if scale == 1.0 else abs(scale - 1.0) * width / 2
        ratios.append(float(np.median(np.linalg.norm(moved - points, axis=1))) / max(box_shift, 1e-6))
    return float(np.median(ratios))


def geometry_plausible(points: Points, box: Box) -> bool:
    """Coarse anatomy: eyes apart by a sane share of the box, nose and mouth below the eyes."""
    width = box[2] - box[0]
    left, right = eye_centres(points)
    eye_gap = float(np.hypot(*(right - left)))
    if not 0.25 * width <= eye_gap <= 0.7 * width:
        return False
    across = (right - left) / max(eye_gap, 1e-6)
    down = np.array([-across[1], across[0]], dtype=np.float32)  # perpendicular, pointing chin-wards
    eye_mid = (left + right) / 2
    nose_depth = float(np.dot(points[33] - eye_mid, down))
    mouth_depth = float(np.dot(points[62:67].mean(axis=0) - eye_mid, down))
    chin_depth = float(np.dot(points[8] - eye_mid, down))
    return 0.0 < nose_depth < mouth_depth < chin_depth


def is_real_face(predictor: Any, gray: npt.NDArray[np.uint8], box: Box, points: Points, score: float) -> bool:
    """Whether a detection (with its detector `score`) is a face: sane anatomy, anchored landmarks."""
    if not geometry_plausible(points, box):
        return False
    return score - ANCHORING_WEIGHT * anchoring(predictor, gray, box, points) > 0.0


def mouth_openness(points: Points) -> float:
    """Inner-lip gap over mouth width (0 closed, ≈0.3 wide open)."""
    width = float(np.hypot(*(points[64] - points[60])))
    gap = float(np.mean(np.linalg.norm(points[[61, 62, 63]] - points[[67, 66, 65]], axis=1)))
    return gap / max(width, 1e-6)
