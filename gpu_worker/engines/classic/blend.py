"""Blending the recoloured face into the frame without a seam.

Poisson blending (`cv2.seamlessClone`) takes the source's gradients inside the mask and the frame's
colours at its border, which removes the colour step at the edge; its solver also nudges pixels
outside the mask within the mask's bounding box, so the result is always composited back through a
feathered alpha that is exactly zero outside the face: pixels outside the mask never change.
"""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

Mask = npt.NDArray[np.uint8]
Alpha = npt.NDArray[np.float32]


def feathered_alpha(mask: Mask, feather: float) -> Alpha:
    """0..1 alpha rising from 0 at the mask's edge to 1 at `feather` pixels inside it."""
    if feather <= 0.5:
        return (mask > 127).astype(np.float32)
    binary = (mask > 127).astype(np.uint8)
    inside = cv2.distanceTransform(binary, cv2.DIST_L2, 5)
    ramp = np.clip(inside / feather, 0.0, 1.0)
    # Smoothstep: no visible kink where the ramp starts and ends.
    return np.asarray(ramp * ramp * (3.0 - 2.0 * ramp), dtype=np.float32)


def cut_hole(alpha: Alpha, hole: Mask, feather: float) -> Alpha:
    """Alpha with `hole` (e.g. the open mouth) showing the target through a soft edge."""
    if not hole.any():
        return alpha
    outside_hole = feathered_alpha(255 - hole, feather)
    return np.asarray(np.minimum(alpha, outside_hole), dtype=np.float32)


def poisson_blend(source: npt.NDArray[np.uint8], target: npt.NDArray[np.uint8], mask: Mask) -> npt.NDArray[np.uint8]:
    """seamlessClone of `source` into `target` (same size) with no positional shift."""
    binary = np.where(mask > 127, 255, 0).astype(np.uint8)
    # The solver needs a one-pixel frame of known border values around the mask.
    binary[0, :] = binary[-1, :] = 0
    binary[:, 0] = binary[:, -1] = 0
    if not binary.any():
        return target
    x, y, width, height = cv2.boundingRect(binary)
    # OpenCV places the mask's bounding box at centre - size/2 (integer division): undo that exactly.
    centre = (x + width // 2, y + height // 2)
    try:
        blended = cv2.seamlessClone(source, target, binary, centre, cv2.NORMAL_CLONE)
    except cv2.error:
        # Degenerate masks (a sliver at the frame edge) can defeat the solver: feathering alone
        # (the caller's composite) still blends them.
        return source
    return np.asarray(blended, dtype=np.uint8)


def composite(target: npt.NDArray[np.uint8], face: npt.NDArray[np.uint8], alpha: Alpha) -> npt.NDArray[np.uint8]:
    """target * (1 - alpha) + face * alpha; where alpha is 0 the target's bytes are returned untouched."""
    weight = alpha[..., None]
    mixed = target.astype(np.float32) * (1.0 - weight) + face.astype(np.float32) * weight
    out = np.asarray(np.clip(mixed + 0.5, 0, 255), dtype=np.uint8)
    untouched = alpha <= 0.0
    out[untouched] = target[untouched]
    return out
