"""Several faces on several people: which person each target face is (pure, on synthetic records)."""

from __future__ import annotations

import numpy as np

from fusionfleet.jobs.faces import MAPPING_ENGINES, engine_problem
from gpu_worker.engines.classic.selector import FaceRecord, assign_people


def _at(direction: int, length: float = 1.0) -> np.ndarray:
    vector = np.zeros(128)
    vector[direction] = length
    return vector


A, B = _at(0), _at(1)  # two people's references, 1.41 apart
THRESHOLD = 0.6  # FaceFusion's default distance 0.3 in dlib's units


def _face(key: int, descriptor: np.ndarray | None, x: float = 0.0) -> FaceRecord:
    return FaceRecord(key, (x, 0.0, x + 50.0, 50.0), 1.0, descriptor)


def test_each_face_goes_to_the_person_whose_reference_it_is_nearest() -> None:
    faces = [_face(1, A + _at(2, 0.2)), _face(2, B + _at(3, 0.3))]
    assert assign_people(faces, [A, B], THRESHOLD) == {1: 0, 2: 1}
    # the references' order decides nothing but the person's index
    assert assign_people(faces, [B, A], THRESHOLD) == {1: 1, 2: 0}


def test_the_assignment_follows_identity_not_place() -> None:
    # WHEN the two people have crossed over (B now on the left), each keeps their own mapping
    before = [_face(1, A, x=0), _face(2, B, x=300)]
    after = [_face(1, A, x=300), _face(2, B, x=0)]
    assert assign_people(before, [A, B], THRESHOLD) == assign_people(after, [A, B], THRESHOLD) == {1: 0, 2: 1}


def test_a_face_near_nobody_or_not_yet_described_is_left_alone() -> None:
    stranger = _face(3, _at(5))
    assert assign_people([stranger, _face(4, None), _face(1, A)], [A, B], THRESHOLD) == {1: 0}


def test_the_nearest_person_wins_when_a_face_is_near_two() -> None:
    close_a, close_b = _at(0, 1.0), _at(0, 1.0) + _at(1, 0.3)
    face = _face(1, _at(0, 1.0) + _at(1, 0.1))
    assert assign_people([face], [close_a, close_b], THRESHOLD) == {1: 0}
    assert assign_people([face], [close_b, close_a], THRESHOLD) == {1: 1}


def test_the_threshold_is_strict_and_two_faces_may_be_one_person() -> None:
    faces = [_face(1, A + _at(2, 0.59)), _face(2, A + _at(3, 0.6)), _face(3, A)]
    assert assign_people(faces, [A, B], THRESHOLD) == {1: 0, 3: 0}


def test_a_person_without_a_reference_face_matches_nobody() -> None:
    # FaceFusion: a reference frame that shows no face at the position names nobody
    assert assign_people([_face(1, A), _face(2, B)], [None, B], THRESHOLD) == {2: 1}
    assert assign_people([_face(1, A)], [], THRESHOLD) == {}


def test_classic_and_facefusion_render_faces_and_the_others_are_told_which_do() -> None:
    assert MAPPING_ENGINES == ("classic", "facefusion")
    assert engine_problem("classic") is None and engine_problem("facefusion") is None
    problem = engine_problem("copy")
    assert problem is not None and "engine: classic or facefusion" in problem and "copy" in problem
