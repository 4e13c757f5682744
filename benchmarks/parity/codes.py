"""Reading the frame-number codes the harness draws (fleetctl.harness.pictures) back out of a render.

A code is CODE_ROWS × CODE_COLUMNS cells, each brighter (bit 1) or darker (bit 0) by CODE_LEVEL in
every channel than what lies under it. It is drawn at the foot of every frame (the strip) and inside
every face, where each processor carries it through whatever it does to the face: a swapper negates it,
an enhancer rotates its channels, the age modifier scales it. So a cell is read as its *residual*: the
cell's mean level (the mean of the three channels) less a plane fitted to a ring of pixels around the
whole code. What is under a code is a plane (the background's gradient, the face's ramp), so the
residuals are ±CODE_LEVEL times whatever gain the processors gave the face, and encoder noise moves a
cell's mean by a level or two.

The judge compares residuals (reference against candidate), not decoded numbers: a face taken from the
neighbouring frame carries another code (at least one cell flips, by twice the level), whatever the
processors did to its sign. `number` decodes a clear code (bits by sign) for the account. Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fleetctl.harness.geometry import CODE_CELL, CODE_COLUMNS, CODE_LEVEL, CODE_ORIGIN, CODE_ROWS

Image = npt.NDArray[np.uint8]

RING = 4  # pixels of the ring around a code, at the target's scale
INSET = 2  # pixels left out at each cell's edge (the encoder rings there), at the target's scale
CLEAR = CODE_LEVEL * 0.4  # a code whose cells stand out less than this on average cannot be read
STRIP_MARGIN = 4  # the strip's distance from the frame's left and bottom edges (pictures.scene_frame)


@dataclass(frozen=True)
class Code:
    """One code as read: every cell's residual (row by row), and the number when the code is clear."""

    residuals: tuple[float, ...]

    @property
    def strength(self) -> float:
        return float(np.mean(np.abs(self.residuals))) if self.residuals else 0.0

    @property
    def clear(self) -> bool:
        return self.strength >= CLEAR

    @property
    def number(self) -> int | None:
        """The number drawn (bit 0 first), read with the sign the code has; None when unclear."""
        if not self.clear:
            return None
        return sum(1 << bit for bit, value in enumerate(self.residuals) if value > 0)

    def distance(self, other: Code) -> float:
        """The most any cell moved between the two reads."""
        return max(abs(a - b) for a, b in zip(self.residuals, other.residuals, strict=True))

    def differs(self, other: Code, tolerance: float) -> bool:
        return self.distance(other) > tolerance


def strip_origin(width: int, height: int, scale: float) -> tuple[float, float]:
    """Where the foot strip's first cell sits in a frame of this size drawn at 1/scale of it."""
    return STRIP_MARGIN * scale, height - (CODE_ROWS * CODE_CELL[1] + STRIP_MARGIN) * scale


def face_origin(x: int, y: int, scale: float) -> tuple[float, float]:
    """Where the code of a face whose box's top left was (x, y) in the target sits in the render."""
    return (x + CODE_ORIGIN[0]) * scale, (y + CODE_ORIGIN[1]) * scale


def _level(image: Image) -> npt.NDArray[np.float64]:
    level: npt.NDArray[np.float64] = np.asarray(image, dtype=np.float64).mean(axis=2)
    return level


def read(image: Image, origin: tuple[float, float], scale: float) -> Code | None:
    """The code whose first cell's top left is `origin` (render pixels); None where it leaves the frame."""
    cell_w, cell_h = CODE_CELL[0] * scale, CODE_CELL[1] * scale
    left, top = origin
    right, bottom = left + CODE_COLUMNS * cell_w, top + CODE_ROWS * cell_h
    ring = RING * scale
    height, width = image.shape[:2]
    x0, y0, x1, y1 = (round(left - ring), round(top - ring), round(right + ring), round(bottom + ring))
    if x0 < 0 or y0 < 0 or x1 > width or y1 > height:
        return None
    level = _level(image[y0:y1, x0:x1])
    ys, xs = np.mgrid[y0:y1, x0:x1].astype(np.float64)
    inside = (xs >= round(left)) & (xs < round(right)) & (ys >= round(top)) & (ys < round(bottom))
    # The plane under the code, fitted to the ring (least squares on 1, x, y).
    basis = np.stack([np.ones(int((~inside).sum())), xs[~inside], ys[~inside]], axis=1)
    plane, *_ = np.linalg.lstsq(basis, level[~inside], rcond=None)
    inset = INSET * scale
    residuals = []
    for row in range(CODE_ROWS):
        for column in range(CODE_COLUMNS):
            cx0, cy0 = left + column * cell_w + inset, top + row * cell_h + inset
            cx1, cy1 = left + (column + 1) * cell_w - inset, top + (row + 1) * cell_h - inset
            cell = level[round(cy0) - y0 : round(cy1) - y0, round(cx0) - x0 : round(cx1) - x0]
            centre = np.array([1.0, (cx0 + cx1) / 2 - 0.5, (cy0 + cy1) / 2 - 0.5])
            residuals.append(round(float(cell.mean() - centre @ plane), 2))
    return Code(tuple(residuals))


def read_strip(image: Image, scale: float) -> Code | None:
    height, width = image.shape[:2]
    return read(image, strip_origin(width, height, scale), scale)
