"""Which target faces to swap, with FaceFusion's selector semantics and option names.

- `face_selector_mode`: `many` (every face), `one` (the first face in `face_selector_order`) or
  `reference` (every face close to a reference face; FaceFusion's default mode).
- `face_selector_order`: FaceFusion's orders, default `large-small`.
- `reference_face_position`: which face (in selector order) of the reference image or frame is the
  reference; `reference_face_distance` (0..1, default 0.3): how close a face must be to it.

FaceFusion measures distance as (1 - cosine similarity) / 2 between ArcFace embeddings and matches
below 0.3. dlib's 128-D descriptors are compared by Euclidean distance, where 0.6 is the usual
same-person threshold, so a FaceFusion distance d is mapped to a dlib threshold 2d (0.3 → 0.6).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpu_worker.engines.base import EngineError

Descriptor = npt.NDArray[np.float64]

MODES = ("many", "one", "reference")
ORDERS = (
    "left-right",
    "right-left",
    "top-bottom",
    "bottom-top",
    "small-large",
    "large-small",
    "best-worst",
    "worst-best",
)
DLIB_DISTANCE_PER_FACEFUSION_DISTANCE = 2.0


@dataclass(frozen=True)
class FaceRecord:
    """What the selector knows about one face: where it is, how sure the detector was, who it is."""

    key: int
    box: tuple[float, float, float, float]
    score: float
    descriptor: Descriptor | None = None

    @property
    def area(self) -> float:
        return max(0.0, self.box[2] - self.box[0]) * max(0.0, self.box[3] - self.box[1])


@dataclass(frozen=True)
class SelectorOptions:
    mode: str = "reference"
    order: str = "large-small"
    reference_position: int = 0
    reference_distance: float = 0.3

    @property
    def dlib_threshold(self) -> float:
        return self.reference_distance * DLIB_DISTANCE_PER_FACEFUSION_DISTANCE


def selector_options(options: Mapping[str, Any]) -> SelectorOptions:
    """Parse the job's FaceFusion-named options, rejecting values FaceFusion would reject."""

    def get(name: str, default: Any) -> Any:
        value = options.get(name)
        return default if value is None else value  # an option set to null means "FaceFusion's default"

    mode = str(get("face_selector_mode", "reference"))
    order = str(get("face_selector_order", "large-small"))
    if mode not in MODES:
        raise EngineError(f"face_selector_mode must be one of {', '.join(MODES)}, not {mode!r}")
    if order not in ORDERS:
        raise EngineError(f"face_selector_order must be one of {', '.join(ORDERS)}, not {order!r}")
    try:
        position = int(get("reference_face_position", 0))
        distance = float(get("reference_face_distance", 0.3))
    except (TypeError, ValueError) as error:
        raise EngineError(f"reference face options must be numbers: {error}") from None
    if position < 0:
        raise EngineError(f"reference_face_position must be ≥ 0, not {position}")
    if not 0.0 <= distance <= 1.0:
        raise EngineError(f"reference_face_distance must be within 0..1, not {distance}")
    return SelectorOptions(mode=mode, order=order, reference_position=position, reference_distance=distance)


_SORT_KEYS: dict[str, tuple[Callable[[FaceRecord], float], bool]] = {
    "left-right": (lambda face: face.box[0], False),
    "right-left": (lambda face: face.box[0], True),
    "top-bottom": (lambda face: face.box[1], False),
    "bottom-top": (lambda face: face.box[1], True),
    "small-large": (lambda face: face.area, False),
    "large-small": (lambda face: face.area, True),
    "best-worst": (lambda face: face.score, True),
    "worst-best": (lambda face: face.score, False),
}


def sort_faces(faces: Sequence[FaceRecord], order: str) -> list[FaceRecord]:
    key, reverse = _SORT_KEYS[order]
    return sorted(faces, key=key, reverse=reverse)


def face_at(faces: Sequence[FaceRecord], order: str, position: int) -> FaceRecord | None:
    """FaceFusion's get_one_face: the face at `position` in order, clamped to the last face."""
    ordered = sort_faces(faces, order)
    if not ordered:
        return None
    return ordered[min(position, len(ordered) - 1)]


def descriptor_distance(first: Descriptor, second: Descriptor) -> float:
    return float(np.linalg.norm(np.asarray(first) - np.asarray(second)))


def select_faces(
    faces: Sequence[FaceRecord], options: SelectorOptions, reference: Descriptor | None = None
) -> list[FaceRecord]:
    """The faces to swap, in selector order. `reference` is needed in `reference` mode only."""
    ordered = sort_faces(faces, options.order)
    if options.mode == "many":
        return ordered
    if options.mode == "one":
        return ordered[:1]
    if reference is None:
        return []
    return [
        face
        for face in ordered
        if face.descriptor is not None and descriptor_distance(face.descriptor, reference) < options.dlib_threshold
    ]


def assign_people(
    faces: Sequence[FaceRecord], references: Sequence[Descriptor | None], threshold: float
) -> dict[int, int]:
    """Several faces on several people: each face's key → the person (an index into `references`)
    whose reference face it is nearest, when that is within `threshold`. A face near nobody, or not
    yet described, is left out (left alone); a person without a reference face matches nobody, as
    FaceFusion's reference mode does. Two faces may both be one person's. Pure."""
    assigned: dict[int, int] = {}
    for face in faces:
        if face.descriptor is None:
            continue
        distances = [
            (descriptor_distance(face.descriptor, reference), person)
            for person, reference in enumerate(references)
            if reference is not None
        ]
        if distances:
            distance, person = min(distances)
            if distance < threshold:
                assigned[face.key] = person
    return assigned
