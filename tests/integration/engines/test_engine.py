"""The classic engine end to end on the sample media: it really swaps, and touches nothing else."""

from __future__ import annotations

import logging
from types import MappingProxyType

import cv2
import numpy as np
import pytest

from gpu_worker.engines.base import Engine, EngineError, EngineJob, Frame, Image, ReportsSelection
from gpu_worker.engines.classic import identity as ident
from gpu_worker.engines.classic import landmarks as lm
from gpu_worker.engines.classic import warp
from gpu_worker.engines.classic.detect import detect_faces
from gpu_worker.engines.classic.engine import ClassicEngine, swap_opacity
from gpu_worker.engines.classic.models import DlibModels
from gpu_worker.engines.registry import create_engine, engine_names

ONE = MappingProxyType({"face_selector_mode": "one"})


def _render(engine: ClassicEngine, job: EngineJob, images: list[Image]) -> list[Image]:
    return list(engine.render(job, [Frame(index, image) for index, image in enumerate(images)]))


def _gray(image: Image) -> np.ndarray:
    return np.asarray(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), dtype=np.uint8)


def _face_region(points: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The face hull lifted well above the brows and grown by 5 % of the face width."""
    extended = warp.extend_with_forehead(points, 0.5)
    mask = warp.polygon_mask(extended, warp.hull_indices(len(extended)), warp.Roi(0, 0, shape[1], shape[0]))
    grow = max(1, round(0.05 * float(np.ptp(extended[:, 0]))))
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1, 2 * grow + 1))
    return np.asarray(cv2.dilate(mask, kernel)) > 0


def test_classic_is_registered_and_follows_the_protocol() -> None:
    # GIVEN the engine registry
    # WHEN the classic engine is created by name
    engine = create_engine("classic", {})

    # THEN it is the ClassicEngine and satisfies the Engine protocol
    assert "classic" in engine_names()
    assert isinstance(engine, ClassicEngine) and isinstance(engine, Engine)


def test_swap_moves_the_identity_to_the_source_and_leaves_the_background(
    engine: ClassicEngine, models: DlibModels, grace: Image, astronaut_clip: list[Image]
) -> None:
    # GIVEN Grace Hopper as the source and a frame of the astronaut shot as the target
    target = astronaut_clip[0]
    job = EngineJob("swap", (grace,), ONE, quality="balanced")
    engine.validate(job)

    # WHEN the frame is rendered
    [output] = _render(engine, job, [target])

    # THEN the face at the target's place is now closer to Grace Hopper than to the astronaut
    [face] = ident.faces_in_image(models, target)
    out_points = lm.predict_landmarks(models.predictor, _gray(output), face.box)
    out_descriptor = ident.describe(models, output, out_points)
    source = ident.describe(models, grace, ident.largest_face(models, grace, "grace").points)
    original = ident.describe(models, target, face.points)
    assert np.linalg.norm(out_descriptor - source) < np.linalg.norm(out_descriptor - original)
    # AND nothing changed outside the face: corners are identical, every change is inside the face
    assert output.shape == target.shape and output.dtype == np.uint8
    for rows, cols in (
        (slice(0, 60), slice(0, 60)),
        (slice(0, 60), slice(-60, None)),
        (slice(-60, None), slice(0, 60)),
        (slice(-60, None), slice(-60, None)),
    ):
        assert np.array_equal(output[rows, cols], target[rows, cols])
    changed = np.any(output != target, axis=2)
    assert changed.sum() > 2000
    assert not (changed & ~_face_region(face.points, target.shape)).any()


def test_frame_without_a_face_passes_through_bit_identical(
    engine: ClassicEngine, grace: Image, suit_only: Image
) -> None:
    # GIVEN a frame with no face, only the suit patch that fools the HOG detector
    job = EngineJob("noface", (grace,), MappingProxyType({"face_selector_mode": "many"}), quality="cinema")

    # WHEN it is rendered
    [output] = _render(engine, job, [suit_only])

    # THEN the very same bytes come back
    assert output.tobytes() == suit_only.tobytes()


def test_false_positives_are_filtered(models: DlibModels) -> None:
    # GIVEN the astronaut photo, where HOG (upsampled) also fires on the suit patch and badge
    from fleetctl import samples

    photo = samples.astronaut()
    candidates = detect_faces(models.detector, _gray(photo), 1.0, 1, -0.3)

    # WHEN real faces are picked from it
    faces = ident.faces_in_image(models, photo)

    # THEN only the head is left (its box is in the photo's upper third)
    assert len(candidates) >= 2
    assert len(faces) == 1 and faces[0].box[3] < 200


def test_source_without_a_face_fails_validation_naming_it(
    engine: ClassicEngine, grace: Image, suit_only: Image
) -> None:
    # GIVEN a job whose second source image has no face
    job = EngineJob("bad-source", (grace, suit_only))

    # WHEN it is validated
    # THEN validate() raises an EngineError that says which source
    with pytest.raises(EngineError, match="source image 2 of 2"):
        engine.validate(job)


def test_several_faces_in_a_source_uses_the_largest_and_says_so(
    models: DlibModels, grace: Image, caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN a source with Grace Hopper twice, once at full size and once at half size
    small = cv2.resize(grace, (grace.shape[1] // 2, grace.shape[0] // 2))
    pad = np.zeros((grace.shape[0] - small.shape[0], small.shape[1], 3), np.uint8)
    double = np.ascontiguousarray(np.hstack([grace, np.vstack([small, pad])]))

    # WHEN its face is taken
    with caplog.at_level(logging.INFO, logger="gpu_worker.engines.classic.identity"):
        face = ident.largest_face(models, double, "source image 1 of 1")

    # THEN the larger face (left half) is used and a log line says there were two
    assert face.box[2] < grace.shape[1]
    assert "has 2 faces; using the largest" in caplog.text


def test_a_source_with_two_faces_of_a_size_is_refused(models: DlibModels, grace: Image) -> None:
    # GIVEN Grace Hopper twice, side by side, at the same size
    double = np.ascontiguousarray(np.hstack([grace, grace]))
    # WHEN its face is taken THEN the ambiguity is an error naming the image
    with pytest.raises(EngineError, match="source image 1 of 1 shows 2 faces of similar size"):
        ident.largest_face(models, double, "source image 1 of 1")


def test_several_sources_are_averaged_into_one_identity(models: DlibModels, grace: Image) -> None:
    # GIVEN two source images of the same person (the portrait and its mirror image)
    mirrored = np.ascontiguousarray(grace[:, ::-1])
    singles = [ident.build_identity(models, [image], 0.3).descriptor for image in (grace, mirrored)]

    # WHEN they are combined
    combined = ident.build_identity(models, [grace, mirrored], 0.3)

    # THEN the identity is the mean of both descriptors and one face texture
    assert combined.count == 2
    np.testing.assert_allclose(combined.descriptor, np.mean(singles, axis=0), atol=1e-9)
    assert combined.face.image.ndim == 3 and len(combined.face.points) == 74


def test_one_output_per_frame_in_order_with_faces_entering_and_leaving(
    engine: ClassicEngine, grace: Image, astronaut_clip: list[Image], suit_only: Image
) -> None:
    # GIVEN lead-in frames, then two empty frames, six frames with a face, two empty frames
    empty = np.full_like(astronaut_clip[0], 128)
    images = [astronaut_clip[0]] * 2 + [empty] * 2 + astronaut_clip[:6] + [empty] * 2
    frames = [Frame(i, image, emit=i >= 2) for i, image in enumerate(images)]
    job = EngineJob("clip", (grace,), ONE, quality="realtime")

    # WHEN the segment is rendered
    outputs = list(engine.render(job, frames))

    # THEN every frame has its output (lead-in included), same shape, in order;
    # empty frames are untouched, and the face is swapped while it is there
    assert len(outputs) == len(frames)
    assert all(out.shape == frame.image.shape for out, frame in zip(outputs, frames, strict=True))
    for index in (2, 3, 10, 11):
        assert np.array_equal(outputs[index], images[index])
    swapped = [not np.array_equal(outputs[i], images[i]) for i in range(4, 10)]
    assert all(swapped[1:]), swapped
    # AND it reports the emitted frames it chose a face in, for the worker's integrity check
    assert isinstance(engine, ReportsSelection)
    assert engine.selected_frames() == frozenset(range(4, 10))


def test_reference_mode_swaps_only_the_reference_person(
    engine: ClassicEngine, grace: Image, astronaut_clip: list[Image]
) -> None:
    # GIVEN reference mode with the astronaut herself as reference, and with someone else
    target = astronaut_clip[3]
    same = EngineJob("ref-same", (grace,), MappingProxyType({}), reference=astronaut_clip[0])
    other = EngineJob("ref-other", (grace,), MappingProxyType({}), reference=grace)

    # WHEN the frame is rendered for each
    [swapped] = _render(engine, same, [target])
    [untouched] = _render(engine, other, [target])

    # THEN only the matching reference leads to a swap
    assert not np.array_equal(swapped, target)
    assert np.array_equal(untouched, target)


def test_face_swapper_weight_follows_facefusion(engine: ClassicEngine, grace: Image) -> None:
    # GIVEN FaceFusion's weight semantics (0.5 = pure source; lower keeps up to 35 % of the target)
    # WHEN weights are converted to the opacity of the swapped face
    # THEN the default is a full swap, 0 shows 65 %, and values outside 0..1 are refused
    assert swap_opacity(0.5) == pytest.approx(1.0)
    assert swap_opacity(1.0) == pytest.approx(1.0)
    assert swap_opacity(0.0) == pytest.approx(0.65)
    with pytest.raises(EngineError, match="face_swapper_weight"):
        engine.validate(EngineJob("w", (grace,), MappingProxyType({"face_swapper_weight": 1.5})))


def test_a_grey_scale_low_resolution_source_face_is_found(models: DlibModels) -> None:
    # GIVEN the astronaut's head as a grey-scale picture 64 pixels tall (a face of about 27 pixels)
    from benchmarks.clips import grey_low_resolution_astronaut

    source = grey_low_resolution_astronaut()
    # WHEN the engine looks for the source face THEN it finds it (upsampling a small still twice)
    face = ident.largest_face(models, source, "source")
    assert 20 <= face.box[2] - face.box[0] <= 40
