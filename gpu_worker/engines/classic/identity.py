"""The source identity: the face texture to paste and its 128-D dlib descriptor.

Several source images are merged into one identity: their descriptors are averaged, and their faces
are warped onto their mean shape, brought to common colour statistics and averaged pixel by pixel,
which keeps what the photos share (the person) and softens what they do not (lighting, blemishes).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from gpu_worker.engines.base import EngineError, Image
from gpu_worker.engines.classic import colour, warp
from gpu_worker.engines.classic.detect import Box, box_area, detect_faces, to_dlib_rect
from gpu_worker.engines.classic.landmarks import is_real_face, predict_landmarks
from gpu_worker.engines.classic.models import DlibModels, dlib_module
from gpu_worker.engines.classic.warp import Points, Triangles

LOG = logging.getLogger(__name__)

Descriptor = npt.NDArray[np.float64]
# Larger source faces are shrunk: more detail than the target can show only costs time.
MAX_SOURCE_FACE = 480
SOURCE_MIN_SCORE = -0.3


@dataclass(frozen=True)
class SourceFace:
    """A source face ready to warp: its image crop, its extended landmarks there, its triangles."""

    image: Image
    points: Points
    triangles: Triangles


@dataclass(frozen=True)
class SourceIdentity:
    face: SourceFace
    descriptor: Descriptor
    count: int


def describe(models: DlibModels, image: Image, points: Points) -> Descriptor:
    """The 128-D descriptor of the face with 68 `points` in a BGR image."""
    dlib = dlib_module()
    x0, y0 = points[:68].min(axis=0)
    x1, y1 = points[:68].max(axis=0)
    parts = [dlib.point(round(float(x)), round(float(y))) for x, y in points[:68]]
    shape = dlib.full_object_detection(to_dlib_rect((float(x0), float(y0), float(x1), float(y1))), parts)
    rgb = np.ascontiguousarray(image[:, :, ::-1])
    return np.asarray(models.encoder.compute_face_descriptor(rgb, shape), dtype=np.float64)


@dataclass(frozen=True)
class StillFace:
    box: Box
    score: float
    points: Points


SMALL_STILL = 400  # pixels, the longer side


def faces_in_image(models: DlibModels, image: Image) -> list[StillFace]:
    """The real faces of a still image (false positives removed), best detector score first."""
    gray = np.asarray(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), dtype=np.uint8)
    faces: list[StillFace] = []
    # Upsample only when needed: small faces in a still are worth the extra time, once. A small image
    # (a low-resolution source face) may be upsampled twice: HOG finds faces from about 80 pixels.
    levels = (0, 1, 2) if max(image.shape[:2]) <= SMALL_STILL else (0, 1)
    for upsample in levels:
        for detection in detect_faces(models.detector, gray, 1.0, upsample, SOURCE_MIN_SCORE):
            points = predict_landmarks(models.predictor, gray, detection.box)
            if is_real_face(models.predictor, gray, detection.box, points, detection.score):
                faces.append(StillFace(detection.box, detection.score, points))
        if faces:
            break
    return faces


AMBIGUOUS_FACE_SHARE = 0.5


def largest_face(models: DlibModels, image: Image, label: str) -> StillFace:
    """The largest real face in a still image; EngineError naming `label` when there is none."""
    faces = faces_in_image(models, image)
    if not faces:
        raise EngineError(f"{label} has no detectable face (a frontal, unobstructed face is needed)")
    faces.sort(key=lambda face: -box_area(face.box))
    if len(faces) > 1:
        # A face much smaller than the main one is someone in the background; two of a size are
        # two people, and guessing which one the user meant would swap in the wrong identity.
        if box_area(faces[1].box) >= AMBIGUOUS_FACE_SHARE * box_area(faces[0].box):
            raise EngineError(f"{label} shows {len(faces)} faces of similar size; use an image with exactly one face")
        LOG.info("%s has %d faces; using the largest", label, len(faces))
    return faces[0]


def _crop(image: Image, points: Points, forehead: float) -> tuple[Image, Points]:
    """The face region of `image` (with a margin), shrunk when larger than MAX_SOURCE_FACE."""
    extended = warp.extend_with_forehead(points, forehead)
    roi = warp.bounding_roi(extended, 0.2, image.shape)
    crop = image[roi.slices()]
    local = extended - np.array([roi.x0, roi.y0], dtype=np.float32)
    size = float(max(np.ptp(local[:, 0]), np.ptp(local[:, 1])))
    if size > MAX_SOURCE_FACE:
        factor = MAX_SOURCE_FACE / size
        crop = np.asarray(cv2.resize(crop, None, fx=factor, fy=factor, interpolation=cv2.INTER_AREA), np.uint8)
        local = local * factor
    return np.ascontiguousarray(crop, dtype=np.uint8), local.astype(np.float32)


def _align_similarity(points: Points, onto: Points) -> Points:
    """`points` moved by the least-squares similarity transform that best maps them onto `onto`."""
    matrix, _ = cv2.estimateAffinePartial2D(points[:68], onto[:68], method=cv2.LMEDS)
    if matrix is None:
        return points
    moved: Points = np.asarray(cv2.transform(points[None, :, :], matrix)[0], dtype=np.float32)
    return moved


def average_faces(crops: Sequence[tuple[Image, Points]]) -> tuple[Image, Points]:
    """Warp every face onto the mean shape (in the first crop's frame) and average their pixels."""
    base_image, base_points = crops[0]
    if len(crops) == 1:
        return base_image, base_points
    aligned = [_align_similarity(points, base_points) for _, points in crops]
    mean_shape = np.mean(aligned, axis=0).astype(np.float32)
    triangles = warp.face_triangulation(mean_shape)
    full = warp.Roi(0, 0, base_image.shape[1], base_image.shape[0])
    hull = warp.polygon_mask(mean_shape, warp.hull_indices(len(mean_shape)), full)
    reference = colour.lab_stats(colour.to_lab(base_image), hull)
    total = np.zeros(base_image.shape, dtype=np.float64)
    weight = np.zeros(base_image.shape[:2], dtype=np.float64)
    for image, points in crops:
        warped, inside = warp.warp_face(image, points, mean_shape, triangles, full)
        lab = colour.to_lab(warped)
        stats = colour.lab_stats(lab, hull)
        if stats is not None and reference is not None:
            # Common colour first, or the average would mix lighting instead of faces.
            warped = colour.from_lab(colour.transfer_stats(lab, stats, reference, match_spread=True))
        total[inside] += warped[inside]
        weight[inside] += 1.0
    covered = weight > 0
    averaged = base_image.copy()
    averaged[covered] = np.clip(total[covered] / weight[covered][:, None] + 0.5, 0, 255).astype(np.uint8)
    return averaged, mean_shape


def build_identity(models: DlibModels, sources: Sequence[Image], forehead: float) -> SourceIdentity:
    """One identity from the job's source images; EngineError naming any source without a face."""
    if not sources:
        raise EngineError("the job has no source image")
    crops: list[tuple[Image, Points]] = []
    descriptors: list[Descriptor] = []
    for index, image in enumerate(sources, start=1):
        label = f"source image {index} of {len(sources)}"
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise EngineError(f"{label} is not a BGR uint8 image")
        points = largest_face(models, image, label).points
        descriptors.append(describe(models, image, points))
        crops.append(_crop(image, points, forehead))
    face_image, face_points = average_faces(crops)
    descriptor = np.mean(descriptors, axis=0)
    height, width = face_image.shape[:2]
    LOG.info("source identity from %d image(s), face crop %dx%d", len(sources), width, height)
    return SourceIdentity(
        face=SourceFace(image=face_image, points=face_points, triangles=warp.face_triangulation(face_points)),
        descriptor=descriptor,
        count=len(sources),
    )


def source_key(sources: Sequence[Image], forehead: float) -> tuple[Any, ...]:
    """A cache key for an identity: digests of the images, so a job's segments share one identity."""
    digests = tuple(
        (image.shape, hashlib.blake2b(np.ascontiguousarray(image).tobytes(), digest_size=16).hexdigest())
        for image in sources
    )
    return (digests, forehead)
