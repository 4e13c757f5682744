"""FaceFusion's selector semantics on synthetic face records (no images needed)."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_worker.engines.base import EngineError
from gpu_worker.engines.classic.selector import (
    FaceRecord,
    SelectorOptions,
    face_at,
    select_faces,
    selector_options,
    sort_faces,
)


def _descriptor(direction: int, length: float = 0.0) -> np.ndarray:
    vector = np.zeros(128)
    vector[direction] = length
    return vector


# Three faces: small on the left, large in the middle, medium on the right (x0, y0, x1, y1).
SMALL_LEFT = FaceRecord(1, (10, 50, 40, 80), score=0.9, descriptor=_descriptor(0, 0.0))
LARGE_MIDDLE = FaceRecord(2, (100, 20, 200, 120), score=0.5, descriptor=_descriptor(0, 0.45))
MEDIUM_RIGHT = FaceRecord(3, (300, 10, 360, 70), score=1.5, descriptor=_descriptor(0, 1.0))
FACES = [SMALL_LEFT, LARGE_MIDDLE, MEDIUM_RIGHT]


def keys(faces: list[FaceRecord]) -> list[int]:
    return [face.key for face in faces]


def test_many_selects_every_face_in_order() -> None:
    # GIVEN three faces and mode "many" with the default order
    options = SelectorOptions(mode="many")

    # WHEN faces are selected
    chosen = select_faces(FACES, options)

    # THEN all three come back, largest first (FaceFusion's default order large-small)
    assert keys(chosen) == [2, 3, 1]


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ("large-small", 2),
        ("small-large", 1),
        ("left-right", 1),
        ("right-left", 3),
        ("top-bottom", 3),
        ("bottom-top", 1),
        ("best-worst", 3),
        ("worst-best", 2),
    ],
)
def test_one_selects_the_first_face_in_the_given_order(order: str, expected: int) -> None:
    # GIVEN mode "one" and an order
    options = SelectorOptions(mode="one", order=order)

    # WHEN faces are selected
    chosen = select_faces(FACES, options)

    # THEN exactly the first face of that order is chosen
    assert keys(chosen) == [expected]


def test_reference_selects_faces_within_the_distance_of_the_reference() -> None:
    # GIVEN a reference identity at the origin; faces at dlib distances 0.0, 0.45 and 1.0
    options = SelectorOptions(mode="reference", reference_distance=0.3)  # dlib threshold 0.6

    # WHEN faces are selected against it
    chosen = select_faces(FACES, options, reference=_descriptor(0, 0.0))

    # THEN the two faces closer than 0.6 are chosen (in selector order), the far one is not
    assert keys(chosen) == [2, 1]
    assert keys(select_faces(FACES, SelectorOptions(mode="reference", reference_distance=0.1), _descriptor(0))) == [1]


def test_reference_without_a_reference_selects_nothing() -> None:
    # GIVEN reference mode but no reference identity (no face found yet)
    # WHEN faces are selected
    # THEN none is swapped, rather than a wrong one
    assert select_faces(FACES, SelectorOptions(mode="reference"), reference=None) == []


def test_face_at_clamps_the_position_like_facefusion() -> None:
    # GIVEN three faces
    # WHEN position 1 and an out-of-range position 9 are asked for in large-small order
    # THEN the second largest, then the last face, is returned; no faces gives None
    assert face_at(FACES, "large-small", 1) == MEDIUM_RIGHT
    assert face_at(FACES, "large-small", 9) == SMALL_LEFT
    assert face_at([], "large-small", 0) is None


def test_options_use_facefusion_names_and_defaults() -> None:
    # GIVEN an empty option set and a full one
    # WHEN they are parsed
    defaults = selector_options({})
    custom = selector_options(
        {
            "face_selector_mode": "many",
            "face_selector_order": "left-right",
            "reference_face_position": 2,
            "reference_face_distance": 0.5,
        }
    )

    # THEN FaceFusion's defaults apply (reference, large-small, 0, 0.3) and names map one to one
    assert defaults == SelectorOptions("reference", "large-small", 0, 0.3)
    assert custom == SelectorOptions("many", "left-right", 2, 0.5)
    assert sort_faces(FACES, custom.order)[0] == SMALL_LEFT


@pytest.mark.parametrize(
    "options",
    [
        {"face_selector_mode": "several"},
        {"face_selector_order": "random"},
        {"reference_face_distance": 1.5},
        {"reference_face_position": -1},
    ],
)
def test_invalid_options_are_rejected(options: dict[str, object]) -> None:
    # GIVEN an option FaceFusion would reject
    # WHEN parsed
    # THEN an EngineError names the problem
    with pytest.raises(EngineError):
        selector_options(options)
