"""Pictures the stand-in models recognise: faces of the harness's people, each carrying its frame number.

Every function is pure (numpy in, numpy out). `scene_frame` draws one frame of a moving scene; the
older single-face helpers (`face_image`, `red_image`, `face_core`, `outside_face`) keep the harness's
first layout: one face of person "a" in a 320×240 picture.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fleetctl.harness.geometry import (
    CODE_CELL,
    CODE_COLUMNS,
    CODE_LEVEL,
    CODE_ORIGIN,
    CODE_ROWS,
    FACE_HEIGHT,
    FACE_WIDTH,
    GRID,
    PEOPLE,
    RAMP,
)

Image = npt.NDArray[np.uint8]

SIZE = (320, 240)
BOX = (112, 56, 112 + FACE_WIDTH, 56 + FACE_HEIGHT)


@dataclass(frozen=True)
class Placed:
    """One face in a frame: whose, and its box's top left (snapped to the detector's grid)."""

    person: str
    x: int
    y: int


def background(width: int, height: int, shade: int = 0) -> Image:
    """A smooth, coloured, blue-leaning background: red never exceeds blue, so nothing here is a face.

    It has chroma on purpose: a decoder or encoder that takes the wrong YUV matrix shifts it.
    """
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    blue = 90 + 60 * ys / max(1, height - 1) + shade
    green = 60 + 90 * xs / max(1, width - 1) + shade
    red = 40 + 40 * (xs + ys) / max(1, width + height - 2) + shade
    image = np.stack([blue, green, np.minimum(red, blue)], axis=-1)
    clipped: Image = np.clip(image, 0, 255).astype(np.uint8)
    return clipped


def code_bits(number: int) -> list[int]:
    return [(number >> bit) & 1 for bit in range(CODE_ROWS * CODE_COLUMNS)]


def draw_code(image: Image, x: int, y: int, number: int) -> None:
    """`number` as brighter (1) and darker (0) cells from (x, y), the same shift in every channel."""
    width, height = CODE_CELL
    for bit, value in enumerate(code_bits(number)):
        row, column = divmod(bit, CODE_COLUMNS)
        top, left = y + row * height, x + column * width
        cell = image[top : top + height, left : left + width].astype(np.int16)
        cell += CODE_LEVEL if value else -CODE_LEVEL
        image[top : top + height, left : left + width] = np.clip(cell, 0, 255).astype(np.uint8)


def draw_face(image: Image, placed: Placed, number: int | None) -> None:
    """A face of `placed.person` at its box, with a luma ramp for texture and the frame's code."""
    blue, green, red = PEOPLE[placed.person]
    ramp = np.linspace(-RAMP, RAMP, FACE_WIDTH, dtype=np.float32)[None, :]
    patch = np.stack([np.full((FACE_HEIGHT, FACE_WIDTH), level, np.float32) + ramp for level in (blue, green, red)], -1)
    # A darker mouth and eyes: something for the landmark-driven processors to move.
    for left, top, right, bottom in ((0.3, 0.74, 0.7, 0.82), (0.27, 0.37, 0.39, 0.43), (0.61, 0.37, 0.73, 0.43)):
        rows = slice(int(FACE_HEIGHT * top), int(FACE_HEIGHT * bottom))
        patch[rows, int(FACE_WIDTH * left) : int(FACE_WIDTH * right)] -= 40
    region = image[placed.y : placed.y + FACE_HEIGHT, placed.x : placed.x + FACE_WIDTH]
    region[...] = np.clip(patch[: region.shape[0], : region.shape[1]], 0, 255).astype(np.uint8)
    if number is not None:
        draw_code(image, placed.x + CODE_ORIGIN[0], placed.y + CODE_ORIGIN[1], number)


def snap(value: float) -> int:
    """The detector's grid: a face drawn on it gives the same box under any decoder's rounding."""
    return round(value / GRID) * GRID


def scene_frame(width: int, height: int, number: int, faces: Sequence[Placed], shade: int = 0) -> Image:
    """One frame: the background, the faces (each with the frame number) and a code strip at the foot."""
    image = background(width, height, shade)
    for placed in faces:
        draw_face(image, placed, number)
    draw_code(image, 4, height - 2 * CODE_CELL[1] - 4, number)
    return image


def face_image(shade: int = 0, person: str = "a", number: int | None = None) -> Image:
    """The harness's first layout: person `person` at BOX in a SIZE picture; `shade` shifts the background."""
    width, height = SIZE
    image = background(width, height, shade)
    draw_face(image, Placed(person, BOX[0], BOX[1]), number)
    return image


def red_image() -> Image:
    """A frame the stand-in content analyser flags."""
    image = face_image()
    image[...] = (0, 0, 230)
    return image


def clip_images(count: int, start: int = 0) -> list[Image]:
    """`count` face pictures whose background shade steps, so frames differ (and their order shows)."""
    return [face_image(shade=offset % 8, number=start + offset) for offset in range(count)]


def face_core() -> tuple[slice, slice]:
    """The middle of the face box, away from the mask's blurred edge."""
    x0, y0, x1, y1 = BOX
    dx, dy = (x1 - x0) // 4, (y1 - y0) // 4
    return slice(y0 + dy, y1 - dy), slice(x0 + dx, x1 - dx)


def outside_face(image: Image) -> Image:
    """The pixels well away from the face box (the swapped region's blur reaches past its edge)."""
    x0, y0, x1, y1 = BOX
    margin = 30
    mask = np.ones(image.shape[:2], dtype=bool)
    mask[max(0, y0 - margin) : y1 + margin, max(0, x0 - margin) : x1 + margin] = False
    return image[mask]
