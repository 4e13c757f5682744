"""Piecewise-affine warping: landmarks land on landmarks, pixels follow their triangles."""

from __future__ import annotations

import numpy as np

from gpu_worker.engines.base import Image
from gpu_worker.engines.classic import identity as ident
from gpu_worker.engines.classic import warp
from gpu_worker.engines.classic.models import DlibModels


def _grid_points(count: int = 5, spacing: float = 20.0, offset: float = 10.0) -> warp.Points:
    xs, ys = np.meshgrid(np.arange(count) * spacing + offset, np.arange(count) * spacing + offset)
    return np.stack([xs.ravel(), ys.ravel()], axis=1).astype(np.float32)


def test_triangle_affines_map_every_destination_vertex_onto_its_source_vertex() -> None:
    # GIVEN a triangulated point set and a non-rigidly jittered copy of it
    rng = np.random.default_rng(1)
    source = _grid_points()
    destination = (source * 1.3 + rng.uniform(-3, 3, source.shape) + [7, -2]).astype(np.float32)
    triangles = warp.triangulate(source)

    # WHEN the per-triangle maps are built
    affines = warp._triangle_affines(destination, source, triangles)

    # THEN each map takes the destination triangle's corners exactly onto the source's corners
    for affine, triangle in zip(affines, triangles, strict=True):
        corners = np.hstack([destination[triangle], np.ones((3, 1), np.float32)])
        np.testing.assert_allclose(corners @ affine.T, source[triangle], atol=1e-3)


def test_warp_by_a_translation_moves_the_pixels_by_that_translation() -> None:
    # GIVEN a textured source and destination landmarks shifted by (5, 3) pixels
    rng = np.random.default_rng(2)
    image = rng.integers(0, 256, (120, 120, 3), dtype=np.uint8)
    source = _grid_points()
    destination = source + np.array([5.0, 3.0], dtype=np.float32)
    roi = warp.Roi(0, 0, 120, 120)

    # WHEN the source is warped onto the destination landmarks
    warped, inside = warp.warp_face(image, source, destination, warp.triangulate(source), roi)

    # THEN every covered pixel (x, y) shows the source pixel (x - 5, y - 3)
    ys, xs = np.nonzero(inside)
    assert len(ys) > 5000
    np.testing.assert_array_equal(warped[ys, xs], image[ys - 3, xs - 5])


def test_warp_maps_source_landmarks_onto_target_landmarks() -> None:
    # GIVEN a source with a bright dot on each interior landmark and a deformed target shape
    source = _grid_points()
    destination = source.copy()
    destination[12] += [6.0, -4.0]  # the centre point moves, its neighbours stay
    image = np.zeros((120, 120, 3), dtype=np.uint8)
    image[int(source[12, 1]) - 1 : int(source[12, 1]) + 2, int(source[12, 0]) - 1 : int(source[12, 0]) + 2] = 255

    # WHEN warped
    warped, _ = warp.warp_face(image, source, destination, warp.triangulate(source), warp.Roi(0, 0, 120, 120))

    # THEN the dot is found at the destination landmark, not where it was
    ys, xs = np.nonzero(warped[:, :, 0] > 128)
    centre = np.array([xs.mean(), ys.mean()])
    np.testing.assert_allclose(centre, destination[12], atol=1.0)
    assert np.linalg.norm(centre - source[12]) > 5


def test_forehead_points_sit_above_the_brows() -> None:
    # GIVEN an upright synthetic 68-point face (chin at the bottom, brows near the top)
    landmarks = np.zeros((68, 2), dtype=np.float32)
    landmarks[:, 0] = np.linspace(0, 100, 68)
    landmarks[:, 1] = 100.0
    landmarks[8] = [50, 200]  # chin
    landmarks[27] = [50, 90]  # nose bridge
    landmarks[17:27, 1] = 80.0  # brows

    # WHEN the forehead is added
    extended = warp.extend_with_forehead(landmarks, ratio=0.3)

    # THEN there are six new points, all higher than the brows by a share of the face height
    assert extended.shape == (74, 2)
    assert (extended[68:, 1] < 80.0 - 0.2 * 110).all()
    assert warp.hull_indices(len(extended))[:17] == tuple(range(17))


def test_face_triangulation_never_joins_the_upper_and_lower_lip(models: DlibModels, grace: Image) -> None:
    # GIVEN Grace Hopper's landmarks (closed mouth: Delaunay would join the lips across it)
    points = warp.extend_with_forehead(ident.largest_face(models, grace, "grace").points, 0.3)
    upper = {49, 50, 51, 52, 53, 61, 62, 63}
    lower = {55, 56, 57, 58, 59, 65, 66, 67}

    # WHEN the face is triangulated
    triangles = warp.face_triangulation(points)

    # THEN the only triangles touching both lips are the fixed ones of the mouth opening
    crossing = {tuple(t) for t in triangles.tolist() if set(t) & upper and set(t) & lower}
    assert crossing == {t for t in warp.MOUTH_TRIANGLES if set(t) & upper and set(t) & lower}
    assert all(set(t) <= set(range(60, 68)) for t in crossing)
    # AND the face hull is covered without gaps
    roi = warp.bounding_roi(points, 0.05, (1000, 1000))
    labels = warp.triangle_labels(points, triangles, roi)
    hull = warp.polygon_mask(points, warp.hull_indices(len(points)), roi) == 255
    assert (labels[hull] >= 0).mean() > 0.999
