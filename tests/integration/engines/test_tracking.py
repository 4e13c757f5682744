"""Following faces nobody tuned for: small ones, and ones that turn away from the detector."""

from __future__ import annotations

import cv2
import numpy as np

from benchmarks.clips import moving_people
from fleetctl import samples
from gpu_worker.engines.base import Image
from gpu_worker.engines.classic.models import DlibModels
from gpu_worker.engines.classic.presets import preset_for
from gpu_worker.engines.classic.tracking import FaceTracker

ASTRONAUT_HEAD = (130, 20, 320, 250)  # left, top, right, bottom of the head in the photo


def head(scale: float) -> Image:
    left, top, right, bottom = ASTRONAUT_HEAD
    crop = samples.astronaut()[top:bottom, left:right]
    size = (round((right - left) * scale), round((bottom - top) * scale))
    return np.asarray(cv2.resize(crop, size, interpolation=cv2.INTER_AREA), dtype=np.uint8)


def frame_with(heads: list[tuple[Image, int]]) -> Image:
    """A 640x360 grey frame with each head pasted at its left edge, vertically centred."""
    frame = np.full((360, 640, 3), 110, dtype=np.uint8)
    for picture, left in heads:
        top = (360 - picture.shape[0]) // 2
        frame[top : top + picture.shape[0], left : left + picture.shape[1]] = picture
    return frame


def gray(image: Image) -> Image:
    return np.asarray(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), dtype=np.uint8)


def test_balanced_finds_faces_below_the_detectors_window(models: DlibModels) -> None:
    # GIVEN a frame with a face about 45 pixels wide (half the HOG detector's 80-pixel window) and a
    # larger one
    image = frame_with([(head(0.5), 60), (head(0.8), 360)])

    # WHEN the balanced preset's tracker sees it
    faces = FaceTracker(models, preset_for("balanced"), 25.0).update(gray(image))

    # THEN both faces are found
    assert len(faces) == 2


def test_a_face_turning_away_keeps_its_track(models: DlibModels) -> None:
    # GIVEN the quality benchmark's moving people: a walker crossing, and a face that turns in-plane
    # while squeezed to half its width (a stand-in for yaw) where the detector no longer finds it
    tracker = FaceTracker(models, preset_for("balanced"), 25.0)

    # WHEN the tracker follows them frame by frame
    tracks = [tracker.update(gray(frame)) for frame in moving_people(75)]

    # THEN the turning face keeps one track through its turn (frames 30-50), beside the walker
    turner = [[face.track_id for face in faces if face.box[1] > 180] for faces in tracks[30:51]]
    assert all(len(ids) == 1 for ids in turner)
    assert len({ids[0] for ids in turner}) == 1
