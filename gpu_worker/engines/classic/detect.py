"""Face detection with dlib's frontal (HOG) detector, at a reduced scale for speed.

The HOG detector's window is 80 pixels, so a frame is shrunk only as far as keeps the smallest face
worth swapping above that. False positives (the astronaut's suit patch is a famous one) are removed
later by the landmark checks in `landmarks.py`; here only the detector score is thresholded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from gpu_worker.engines.classic.models import dlib_module

Box = tuple[float, float, float, float]
"""x0, y0, x1, y1 in frame pixels."""

HOG_WINDOW = 80


@dataclass(frozen=True)
class Detection:
    box: Box
    score: float


def box_area(box: Box) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def box_iou(first: Box, second: Box) -> float:
    x0, y0 = max(first[0], second[0]), max(first[1], second[1])
    x1, y1 = min(first[2], second[2]), min(first[3], second[3])
    overlap = box_area((x0, y0, x1, y1))
    union = box_area(first) + box_area(second) - overlap
    return overlap / union if union > 0 else 0.0


def to_dlib_rect(box: Box) -> Any:
    return dlib_module().rectangle(round(box[0]), round(box[1]), round(box[2]), round(box[3]))


def detect_faces(
    detector: Any,
    gray: npt.NDArray[np.uint8],
    scale: float,
    upsample: int,
    min_score: float,
) -> list[Detection]:
    """Faces in a grayscale frame, boxes in the frame's own pixels, best score first."""
    small = gray
    if scale < 0.999:
        small = np.asarray(cv2.resize(gray, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA), np.uint8)
    rects, scores, _ = detector.run(np.ascontiguousarray(small), upsample, min_score)
    found = [
        Detection(
            box=(
                rect.left() / scale,
                rect.top() / scale,
                (rect.right() + 1) / scale,
                (rect.bottom() + 1) / scale,
            ),
            score=float(score),
        )
        for rect, score in zip(rects, scores, strict=True)
    ]
    return sorted(found, key=lambda detection: -detection.score)
