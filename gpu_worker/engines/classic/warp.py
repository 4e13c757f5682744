"""Piecewise-affine warping of a source face onto a target face over a Delaunay triangulation.

Every target pixel inside the face is mapped back into the source through the affine map of the
triangle it lies in; one `cv2.remap` then samples the source. Building the maps from a triangle label
image (rather than warping triangle by triangle) leaves no cracks between triangles.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt
from scipy.spatial import Delaunay

Points = npt.NDArray[np.float32]
"""Nx2 float32 (x, y) pixel positions."""
Triangles = npt.NDArray[np.int32]
"""Tx3 indices into a point array."""

JAW = tuple(range(17))
BROWS = tuple(range(17, 27))
# A triangle whose source area is below this share of the typical source/destination area ratio
# counts as collapsed (see `_collapsed`).
COLLAPSED_AREA_RATIO = 0.15
# The forehead points sit above these brow points (outer ends, middles, inner ends).
FOREHEAD_ANCHORS = (17, 19, 21, 22, 24, 26)


@dataclass(frozen=True)
class Roi:
    """An axis-aligned pixel rectangle [x0, x1) x [y0, y1)."""

    x0: int
    y0: int
    x1: int
    y1: int

    @property
    def width(self) -> int:
        return self.x1 - self.x0

    @property
    def height(self) -> int:
        return self.y1 - self.y0

    @property
    def empty(self) -> bool:
        return self.width <= 0 or self.height <= 0

    def slices(self) -> tuple[slice, slice]:
        return slice(self.y0, self.y1), slice(self.x0, self.x1)


def face_up_and_height(landmarks: Points) -> tuple[npt.NDArray[np.float32], float]:
    """The face's "up" unit vector (chin to nose bridge) and the chin-to-bridge distance."""
    bridge = landmarks[27].astype(np.float64)
    chin = landmarks[8].astype(np.float64)
    vector = bridge - chin
    length = float(np.hypot(*vector))
    if length < 1e-6:
        return np.array([0.0, -1.0], dtype=np.float32), 1.0
    return (vector / length).astype(np.float32), length


def extend_with_forehead(landmarks: Points, ratio: float) -> Points:
    """Append forehead points: brow points moved up by `ratio` x the chin-to-bridge distance.

    The 68-point model stops at the brows; without these points the swap would leave the target's
    forehead and brow ridge, which carry much of a face's identity.
    """
    up, height = face_up_and_height(landmarks)
    anchors = landmarks[list(FOREHEAD_ANCHORS)]
    # Outer points rise a little less so the hull follows the rounded hairline.
    lift = np.array([0.75, 1.0, 1.1, 1.1, 1.0, 0.75], dtype=np.float32)[:, None]
    forehead = anchors + up[None, :] * (ratio * height) * lift
    return np.vstack([landmarks[:68], forehead]).astype(np.float32)


def hull_indices(point_count: int) -> tuple[int, ...]:
    """Indices of the outline of an extended point set: jaw left to right, then the forehead back."""
    forehead = tuple(range(68, point_count))
    return JAW + tuple(reversed(forehead)) if forehead else JAW + tuple(reversed(BROWS))


def triangulate(points: Points) -> Triangles:
    """Delaunay triangles of `points`; computed once on the source shape and reused for targets."""
    triangles = Delaunay(points.astype(np.float64)).simplices
    return np.ascontiguousarray(triangles, dtype=np.int32)


# Fixed triangles for the lips and the mouth opening (dlib 68-point indices): Delaunay cannot be
# trusted there, because on a closed mouth it joins upper and lower lip across the opening.
OUTER_LIPS = tuple(range(48, 60))
INNER_LIPS = tuple(range(60, 68))
MOUTH_TRIANGLES = (
    # upper lip: outer 48..54 over inner 60..64
    (48, 49, 60), (49, 61, 60), (49, 50, 61), (50, 62, 61), (50, 51, 62),
    (51, 52, 62), (52, 63, 62), (52, 53, 63), (53, 64, 63), (53, 54, 64),
    # lower lip: outer 54..59, 48 under inner 64..67, 60
    (54, 55, 64), (55, 65, 64), (55, 56, 65), (56, 66, 65), (56, 57, 66),
    (57, 58, 66), (58, 67, 66), (58, 59, 67), (59, 60, 67), (59, 48, 60),
    # the opening between the inner lips
    (60, 61, 67), (61, 66, 67), (61, 62, 66), (62, 65, 66), (62, 63, 65), (63, 64, 65),
)  # fmt: skip


def face_triangulation(points: Points) -> Triangles:
    """Triangles covering a face: Delaunay everywhere except the mouth, which has a fixed topology.

    Plain Delaunay on a closed mouth joins the lower lip to the upper lip; warped onto an open mouth
    such a triangle spans lips and teeth at once. Here every lip triangle stays on its own lip and
    the opening has its own triangles (which collapse when the source mouth is closed).
    """
    others = np.array([i for i in range(len(points)) if i not in INNER_LIPS])
    triangles = others[triangulate(points[others])]
    lips = np.asarray(points[list(OUTER_LIPS)], dtype=np.float32).reshape(-1, 1, 2)
    keep = []
    for triangle in triangles:
        on_lips = sum(1 for index in triangle if index in OUTER_LIPS)
        centre = points[triangle].mean(axis=0)
        inside_lips = cv2.pointPolygonTest(lips, (float(centre[0]), float(centre[1])), False) > 0
        keep.append(not (on_lips >= 2 and inside_lips))
    mouth = np.array(MOUTH_TRIANGLES, dtype=np.int32)
    return np.ascontiguousarray(np.vstack([triangles[np.array(keep)], mouth]), dtype=np.int32)


def bounding_roi(points: Points, margin: float, shape: tuple[int, ...]) -> Roi:
    """The points' bounding box grown by `margin` x its size on each side, clipped to the image."""
    x0, y0 = points.min(axis=0)
    x1, y1 = points.max(axis=0)
    pad = margin * max(x1 - x0, y1 - y0)
    return Roi(
        x0=max(0, int(np.floor(x0 - pad))),
        y0=max(0, int(np.floor(y0 - pad))),
        x1=min(int(shape[1]), int(np.ceil(x1 + pad)) + 1),
        y1=min(int(shape[0]), int(np.ceil(y1 + pad)) + 1),
    )


def _triangle_affines(dst: Points, src: Points, triangles: Triangles) -> npt.NDArray[np.float32]:
    """Tx2x3 affine maps taking each destination triangle onto its source triangle."""
    dst_tri = dst[triangles].astype(np.float64)  # Tx3x2
    src_tri = src[triangles].astype(np.float64)
    ones = np.ones((len(triangles), 3, 1))
    design = np.concatenate([dst_tri, ones], axis=2)  # Tx3x3: rows (x, y, 1)
    # Degenerate (zero-area) triangles get a pseudo-inverse instead of failing the whole frame.
    inverse = np.linalg.pinv(design)
    affines: npt.NDArray[np.float32] = np.einsum("tij,tjk->tki", inverse, src_tri).astype(np.float32)
    return affines  # Tx2x3


def _collapsed(dst: Points, src: Points, triangles: Triangles) -> npt.NDArray[np.bool_]:
    """Triangles whose source is (nearly) a line where the destination is not.

    A closed source mouth warped onto an open one is the usual case: sampling a line across a whole
    destination triangle smears it into streaks, so such pixels are better left to the target.
    """

    def areas(points: Points) -> npt.NDArray[np.float64]:
        a, b, c = (points[triangles[:, k]].astype(np.float64) for k in range(3))
        u, v = b - a, c - a
        return np.asarray(0.5 * np.abs(u[:, 0] * v[:, 1] - u[:, 1] * v[:, 0]), dtype=np.float64)

    ratio = areas(src) / np.maximum(areas(dst), 1e-6)
    typical = float(np.median(ratio)) if len(ratio) else 1.0
    return np.asarray(ratio < COLLAPSED_AREA_RATIO * typical, dtype=np.bool_)


def triangle_labels(dst: Points, triangles: Triangles, roi: Roi) -> npt.NDArray[np.int32]:
    """An ROI-sized image holding, per pixel, the index of the destination triangle (-1: none)."""
    labels = np.full((roi.height, roi.width), -1, dtype=np.int32)
    offset = np.array([roi.x0, roi.y0], dtype=np.float32)
    # Fixed-point vertices (4 fractional bits) keep sub-pixel accuracy in the rasterisation.
    shift = 4
    scaled = np.round((dst - offset) * (1 << shift)).astype(np.int32)
    for index, triangle in enumerate(triangles):
        cv2.fillConvexPoly(labels, scaled[triangle], int(index), lineType=cv2.LINE_8, shift=shift)
    return labels


def piecewise_affine_maps(
    dst: Points, src: Points, triangles: Triangles, roi: Roi
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
    """Per-pixel source coordinates for the ROI (for cv2.remap) and where they are defined.

    Pixels of collapsed triangles count as undefined (see `_collapsed`).
    """
    labels = triangle_labels(dst, triangles, roi)
    collapsed = np.append(_collapsed(dst, src, triangles), True)  # index -1: outside every triangle
    inside = ~collapsed[labels]
    affines = _triangle_affines(dst, src, triangles)
    ys, xs = np.mgrid[roi.y0 : roi.y1, roi.x0 : roi.x1].astype(np.float32)
    safe = np.where(inside, labels, 0)
    coefficients = affines[safe]  # HxWx2x3
    map_x = coefficients[..., 0, 0] * xs + coefficients[..., 0, 1] * ys + coefficients[..., 0, 2]
    map_y = coefficients[..., 1, 0] * xs + coefficients[..., 1, 1] * ys + coefficients[..., 1, 2]
    map_x = np.where(inside, map_x, -1.0).astype(np.float32)
    map_y = np.where(inside, map_y, -1.0).astype(np.float32)
    return map_x, map_y, inside


def warp_face(
    src_image: npt.NDArray[np.uint8],
    src_points: Points,
    dst_points: Points,
    triangles: Triangles,
    roi: Roi,
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.bool_]]:
    """The source face warped so that `src_points` land on `dst_points`, as an ROI-sized image."""
    map_x, map_y, inside = piecewise_affine_maps(dst_points, src_points, triangles, roi)
    warped = cv2.remap(src_image, map_x, map_y, interpolation=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return np.asarray(warped, dtype=np.uint8), inside


def polygon_mask(points: Points, indices: tuple[int, ...], roi: Roi) -> npt.NDArray[np.uint8]:
    """A 0/255 ROI-sized mask of the polygon through `points[indices]`."""
    mask = np.zeros((roi.height, roi.width), dtype=np.uint8)
    shift = 4
    polygon = np.round((points[list(indices)] - [roi.x0, roi.y0]) * (1 << shift)).astype(np.int32)
    cv2.fillPoly(mask, [polygon], 255, lineType=cv2.LINE_AA, shift=shift)
    return mask
