"""Clips for the quality benchmark, generated from what the packages ship (two identities: scikit-image's
astronaut and matplotlib's Grace Hopper). Beyond a camera path over a still, the people themselves move:
they enter and leave, approach, turn (in-plane and a horizontal squeeze standing in for yaw), appear in
groups of different sizes and colour; and source faces nobody tuned for: grey-scale, low resolution,
padded by repeating their edges, onto a group of six.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import cv2
import numpy as np

from fleetctl import samples
from gpu_worker.engines.base import Image

WIDTH, HEIGHT, FPS = 640, 360, 25
# Head crops around the faces dlib finds in the photos (astronaut face (179, 83)-(267, 171)).
ASTRONAUT_HEAD = (130, 20, 320, 250)  # left, top, right, bottom


@dataclass(frozen=True)
class Clip:
    name: str
    source: Callable[[], Image]
    frames: Callable[[int], Iterator[Image]]
    options: dict[str, str]
    what: str


def _background(index: int) -> Image:
    """A textured, slowly drifting background: flat colour would flatter the background measure."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    base = 90 + 40 * np.sin((x + 2 * index) / 37.0) * np.cos(y / 23.0)
    image = np.stack([base, base * 0.9 + 20, base * 0.8 + 35], axis=2)
    return np.asarray(np.clip(image, 0, 255), dtype=np.uint8)


def astronaut_head() -> Image:
    left, top, right, bottom = ASTRONAUT_HEAD
    return np.ascontiguousarray(samples.astronaut()[top:bottom, left:right])


def _paste(frame: Image, sprite: Image, centre_x: float, centre_y: float) -> None:
    height, width = sprite.shape[:2]
    left, top = round(centre_x - width / 2), round(centre_y - height / 2)
    x0, y0 = max(0, left), max(0, top)
    x1, y1 = min(WIDTH, left + width), min(HEIGHT, top + height)
    if x1 > x0 and y1 > y0:
        frame[y0:y1, x0:x1] = sprite[y0 - top : y1 - top, x0 - left : x1 - left]


def _posed(head: Image, scale: float, angle: float, squeeze: float) -> Image:
    """The head scaled, turned in-plane by `angle` degrees and squeezed horizontally (a stand-in for yaw)."""
    height, width = head.shape[:2]
    size = (max(8, round(width * scale * squeeze)), max(8, round(height * scale)))
    resized = cv2.resize(head, size, interpolation=cv2.INTER_AREA)
    matrix = cv2.getRotationMatrix2D((size[0] / 2, size[1] / 2), angle, 1.0)
    return np.ascontiguousarray(cv2.warpAffine(resized, matrix, size, borderMode=cv2.BORDER_REPLICATE))


def moving_people(count: int) -> Iterator[Image]:
    """One person walks in from the left, approaches and leaves on the right; another turns their head."""
    head = astronaut_head()
    for index in range(count):
        t = index / max(1, count - 1)
        frame = _background(index)
        walker = _posed(head, 0.5 + 0.3 * t, 6 * math.sin(6 * t), 1.0)
        _paste(frame, walker, -80 + (WIDTH + 160) * t, HEIGHT * 0.33)
        turner = _posed(head, 0.6, 18 * math.sin(2 * math.pi * t), 0.75 + 0.25 * math.cos(2 * math.pi * t))
        _paste(frame, turner, WIDTH * 0.5, HEIGHT * 0.78)
        yield frame


def group(count: int) -> Iterator[Image]:
    """Five people of different sizes (one mirrored, one grey-scale), each bobbing on their own."""
    head = astronaut_head()
    grey = cv2.cvtColor(cv2.cvtColor(head, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
    people = [
        (head, 0.55, 0.14), (head[:, ::-1], 0.62, 0.34), (grey, 0.7, 0.54), (head, 0.8, 0.74),
        (head[:, ::-1], 0.5, 0.92),
    ]  # fmt: skip
    for index in range(count):
        frame = _background(index)
        for number, (picture, scale, x) in enumerate(people):
            bob = 10 * math.sin(index / 7.0 + number)
            sprite = _posed(np.ascontiguousarray(picture), scale, 5 * math.sin(index / 11.0 + number), 1.0)
            _paste(frame, sprite, WIDTH * x, HEIGHT * 0.5 + bob)
        yield frame


def grace_camera(count: int) -> Iterator[Image]:
    """A slow zoom and pan over Grace Hopper's portrait."""
    photo = samples.grace_hopper()
    for index in range(count):
        t = index / FPS
        scale = HEIGHT / photo.shape[0] * (1.15 + 0.1 * math.sin(t))
        matrix = cv2.getRotationMatrix2D((269.0, 245.0), 3 * math.sin(t / 1.3), scale)
        matrix[0, 2] += WIDTH * (0.5 + 0.1 * math.sin(t / 2)) - 269.0
        matrix[1, 2] += HEIGHT * 0.5 - 245.0
        warped = cv2.warpAffine(photo, matrix, (WIDTH, HEIGHT), borderMode=cv2.BORDER_REFLECT)
        yield np.ascontiguousarray(warped, dtype=np.uint8)


def grey_low_resolution_astronaut() -> Image:
    """A source face nobody tuned for: grey-scale, 64 pixels tall."""
    head = astronaut_head()
    small = cv2.resize(head, (round(head.shape[1] * 64 / head.shape[0]), 64), interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray(cv2.cvtColor(cv2.cvtColor(small, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR))


# Grace Hopper's face in her portrait (dlib's CNN detector): (187, 145)-(357, 315), about 170 pixels.
GRACE_HEAD = (100, 40, 444, 440)  # left, top, right, bottom
GRACE_FACE = 170


def unseen_source(face: int = 72, grey: bool = True, pad: float = 0.6) -> Image:
    """A source face as a new user might bring one: Grace Hopper's head brought down to a `face`-pixel
    face and upscaled back (blurred detail, low resolution), optionally grey-scale (one channel
    repeated), padded on every side by `pad` x its size by repeating its edge pixels (smeared bands
    that look like hair or shoulders to a detector and to an alignment)."""
    left, top, right, bottom = GRACE_HEAD
    head = samples.grace_hopper()[top:bottom, left:right]
    factor = face / GRACE_FACE
    small = cv2.resize(head, None, fx=factor, fy=factor, interpolation=cv2.INTER_AREA)
    image = cv2.resize(small, (head.shape[1], head.shape[0]), interpolation=cv2.INTER_CUBIC)
    if grey:
        image = cv2.cvtColor(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
    if pad > 0:
        y, x = round(pad * image.shape[0]), round(pad * image.shape[1])
        image = cv2.copyMakeBorder(image, y, y, x, x, cv2.BORDER_REPLICATE)
    return np.ascontiguousarray(image, dtype=np.uint8)


def group_of_six(count: int) -> Iterator[Image]:
    """Six people side by side (the astronaut at different sizes, mirrored, one grey-scale), each bobbing and
    tilting on their own: a group shot's faces are small (about 40 to 60 pixels)."""
    head = astronaut_head()
    grey = cv2.cvtColor(cv2.cvtColor(head, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
    people = [
        (head, 0.5, 0.09), (head[:, ::-1], 0.56, 0.25), (grey, 0.62, 0.42), (head, 0.66, 0.59),
        (head[:, ::-1], 0.52, 0.76), (head, 0.48, 0.92),
    ]  # fmt: skip
    for index in range(count):
        frame = _background(index)
        for number, (picture, scale, x) in enumerate(people):
            bob = 8 * math.sin(index / 6.0 + 2 * number)
            sprite = _posed(np.ascontiguousarray(picture), scale, 6 * math.sin(index / 9.0 + number), 1.0)
            _paste(frame, sprite, WIDTH * x, HEIGHT * 0.5 + bob)
        yield frame


def grace_head() -> Image:
    left, top, right, bottom = GRACE_HEAD
    return np.ascontiguousarray(samples.grace_hopper()[top:bottom, left:right])


# Two people crossing (issue 32's several faces on several people): Grace Hopper walks along the top
# and the astronaut along the bottom, each from one side to the other and back, so they pass each
# other every CROSSING_PERIOD / 2 seconds with their faces (about 70 pixels) never overlapping.
CROSSING_PERIOD = 3.0  # seconds of a walk there and back
PAIR = ("grace", "astronaut")
_PAIR_SCALES = {"grace": 70 / GRACE_FACE, "astronaut": 0.8}


def pair_positions(index: int) -> dict[str, tuple[float, float]]:
    """Where each person's head is centred in frame `index` of `crossing_pair` (the ground truth)."""
    swing = 0.36 * WIDTH * math.cos(2 * math.pi * index / (FPS * CROSSING_PERIOD))
    bob = 6 * math.sin(index / 5.0)
    return {
        "grace": (WIDTH / 2 - swing, HEIGHT * 0.29 + bob),
        "astronaut": (WIDTH / 2 + swing, HEIGHT * 0.72 - bob),
    }


def crossing_pair(count: int) -> Iterator[Image]:
    """Grace Hopper and the astronaut walking past each other, again and again, each tilting a little."""
    heads = {"grace": grace_head(), "astronaut": astronaut_head()}
    for index in range(count):
        frame = _background(index)
        for number, (name, (x, y)) in enumerate(pair_positions(index).items()):
            tilt = 5 * math.sin(index / 9.0 + 2 * number)
            _paste(frame, _posed(heads[name], _PAIR_SCALES[name], tilt, 1.0), x, y)
        yield frame


CLIPS = (
    Clip("camera-path", samples.grace_hopper, lambda n: samples.astronaut_frames(n, WIDTH, HEIGHT),
         {"face_selector_mode": "one"}, "a camera path over the astronaut photo (the old benchmark's clip)"),
    Clip("moving-people", samples.grace_hopper, moving_people, {"face_selector_mode": "many"},
         "a person entering, approaching and leaving, another turning their head"),
    Clip("group", samples.grace_hopper, group, {"face_selector_mode": "many"},
         "five people of different sizes, one mirrored, one grey-scale"),
    Clip("grey-low-res-source", grey_low_resolution_astronaut, grace_camera, {"face_selector_mode": "one"},
         "a grey-scale 64-pixel source face onto Grace Hopper"),
    Clip("unseen-source-group", unseen_source, group_of_six, {"face_selector_mode": "many"},
         "a grey, low-resolution (72-pixel face, upscaled), edge-padded source onto a group of six"),
    Clip("tiny-padded-source-group", lambda: unseen_source(face=40, pad=1.0), group_of_six,
         {"face_selector_mode": "many"},
         "a grey 40-pixel face (upscaled), padded by its own size on every side, onto a group of six"),
)  # fmt: skip
