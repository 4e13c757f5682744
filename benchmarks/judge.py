"""An independent judge of a face swap, applied to encoded videos.

It shares nothing with the classic engine but the model files' package: faces are found with dlib's
CNN face detector (the engine uses the HOG detector), aligned with the 5-point model (the engine uses
the 68-point one) and described with dlib's ResNet descriptor (the engine uses it only to pick the
reference person, never to make a swap). Frames come from OpenCV's own FFmpeg build, not the
pipeline's decoder.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from gpu_worker.engines.classic.models import models_dir

Image = npt.NDArray[np.uint8]
Box = tuple[int, int, int, int]  # left, top, right, bottom
# A face counts as the same place in target and output when the boxes overlap this much.
SAME_PLACE_IOU = 0.4
# The region left out of the background measure: the face box grown by this share of its size.
FACE_MARGIN = 0.35


@dataclass(frozen=True)
class Face:
    box: Box
    descriptor: npt.NDArray[np.float64]


class Judge:
    def __init__(self) -> None:
        import dlib

        folder = models_dir()
        self._detector: Any = dlib.cnn_face_detection_model_v1(str(folder / "mmod_human_face_detector.dat"))
        self._shape: Any = dlib.shape_predictor(str(folder / "shape_predictor_5_face_landmarks.dat"))
        self._encoder: Any = dlib.face_recognition_model_v1(str(folder / "dlib_face_recognition_resnet_model_v1.dat"))
        self._dlib = dlib

    def faces(self, image: Image, upsample: int = 1) -> list[Face]:
        rgb = np.ascontiguousarray(image[:, :, ::-1])
        found = []
        for detection in self._detector(rgb, upsample):
            rect = detection.rect
            shape = self._shape(rgb, rect)
            descriptor = np.asarray(self._encoder.compute_face_descriptor(rgb, shape), dtype=np.float64)
            box = (max(0, rect.left()), max(0, rect.top()), rect.right(), rect.bottom())
            found.append(Face(box, descriptor))
        return found

    def identity(self, image: Image) -> npt.NDArray[np.float64]:
        """The descriptor of the largest face in a source image (upsampled: sources may be small)."""
        faces = self.faces(image, upsample=2)
        if not faces:
            raise ValueError("the judge finds no face in the source image")
        return max(faces, key=lambda face: (face.box[2] - face.box[0]) * (face.box[3] - face.box[1])).descriptor


def iou(a: Box, b: Box) -> float:
    width = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    height = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = width * height
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union else 0.0


def video_frames(path: Path) -> Iterator[Image]:
    capture = cv2.VideoCapture(str(path))
    try:
        while True:
            ok, frame = capture.read()
            if not ok:
                return
            yield np.ascontiguousarray(frame, dtype=np.uint8)
    finally:
        capture.release()


def outside_faces(shape: tuple[int, ...], boxes: list[Box]) -> npt.NDArray[np.bool_]:
    mask = np.ones(shape[:2], dtype=bool)
    for left, top, right, bottom in boxes:
        grow_x, grow_y = round((right - left) * FACE_MARGIN), round((bottom - top) * FACE_MARGIN)
        mask[max(0, top - 2 * grow_y) : bottom + grow_y, max(0, left - grow_x) : right + grow_x] = False
    return mask


@dataclass
class Verdict:
    """What the judge saw over a clip's sampled frames."""

    target_faces: int = 0
    redetected: int = 0
    closer_to_source: int = 0
    distance_to_source: float = 0.0
    distance_to_target: float = 0.0
    squared_error: float = 0.0
    outside_values: int = 0

    def add_frame(self, judge: Judge, identity: npt.NDArray[np.float64], target: Image, output: Image) -> None:
        before, after = judge.faces(target), judge.faces(output)
        for face in before:
            self.target_faces += 1
            match = max(after, key=lambda other: iou(face.box, other.box), default=None)
            if match is None or iou(face.box, match.box) < SAME_PLACE_IOU:
                continue  # not re-detected: it counts against the swap
            self.redetected += 1
            to_source = float(np.linalg.norm(match.descriptor - identity))
            to_target = float(np.linalg.norm(match.descriptor - face.descriptor))
            self.distance_to_source += to_source
            self.distance_to_target += to_target
            self.closer_to_source += int(to_source < to_target)
        mask = outside_faces(target.shape, [face.box for face in before + after])
        difference = output.astype(np.float64)[mask] - target.astype(np.float64)[mask]
        self.squared_error += float((difference**2).sum())
        self.outside_values += int(difference.size)

    def summary(self) -> dict[str, Any]:
        mse = self.squared_error / max(1, self.outside_values)
        return {
            "target_faces": self.target_faces,
            "redetected_share": self.redetected / self.target_faces if self.target_faces else None,
            # Over every face the target shows: a face the judge no longer finds is not a success.
            "identity_share": self.closer_to_source / self.target_faces if self.target_faces else None,
            "mean_distance_to_source": self.distance_to_source / self.redetected if self.redetected else None,
            "mean_distance_to_target": self.distance_to_target / self.redetected if self.redetected else None,
            "background_psnr_db": math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse),
        }
