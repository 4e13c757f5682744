"""Catch an engine that produces something plausible but wrong: black, stray black, frozen or unchanged output.

FaceFusion, for one, replaces a frame it cannot read with a black one and exits 0; an engine can also
choose faces and then change nothing. Each is a failed segment with the reason, not a quiet bad output.
"""

from __future__ import annotations

import hashlib

import numpy as np

from fusionfleet.errors import SegmentFailed
from gpu_worker.engines.base import Image

# A frame this dark on average is black; sampled on a coarse grid, so the check costs little.
BLACK_MEAN = 4.0
# An input frame this bright is plainly not black: its output going black is the engine's doing.
LIT_MEAN = 16.0
SAMPLE_STEP = 8
# Frames named in a failure reason; the count says how many more there were.
SHOWN_FRAMES = 5


def _fingerprint(image: Image) -> tuple[float, bytes]:
    sample = image[::SAMPLE_STEP, ::SAMPLE_STEP]
    # The brightness of the colour alone (a BGRA frame's alpha is no light); the digest of all of it.
    mean = float(sample[:, :, :3].mean())
    return mean, hashlib.blake2b(np.ascontiguousarray(sample).tobytes(), digest_size=8).digest()


class IntegrityWatch:
    """Fingerprints of input and output frames; `check` fails when the output is black or frozen
    where the input is not."""

    def __init__(self) -> None:
        self._inputs: list[tuple[float, bytes]] = []
        self._outputs: list[tuple[float, bytes]] = []
        self._indices: list[int] = []

    def saw_input(self, image: Image, index: int | None = None) -> None:
        self._inputs.append(_fingerprint(image))
        self._indices.append(len(self._indices) if index is None else index)

    def saw_output(self, image: Image) -> None:
        self._outputs.append(_fingerprint(image))

    def check(self, what: str, selected: frozenset[int] | None = None) -> None:
        """`selected`: the frames the engine chose faces to swap in, when it reports them."""
        if not self._outputs:
            return
        black_out = all(mean < BLACK_MEAN for mean, _ in self._outputs)
        if black_out and not all(mean < BLACK_MEAN for mean, _ in self._inputs):
            raise SegmentFailed(f"{what}: the engine's output is black where the input is not")
        frozen_out = len({digest for _, digest in self._outputs}) == 1
        if len(self._outputs) > 1 and frozen_out and len({digest for _, digest in self._inputs}) > 1:
            raise SegmentFailed(f"{what}: the engine's output is one frozen picture where the input moves")
        pairs = list(zip(self._indices, self._inputs, self._outputs, strict=False))
        stray = [index for index, (in_mean, _), (out_mean, _) in pairs if out_mean < BLACK_MEAN <= LIT_MEAN <= in_mean]
        if stray:
            raise SegmentFailed(
                f"{what}: the engine's output has {len(stray)} black frame(s) where the input is not black "
                f"(frame {_listed(stray)})"
            )
        if selected:
            changed = [index for index, (_, before), (_, after) in pairs if index in selected and before != after]
            if not changed:
                raise SegmentFailed(
                    f"{what}: the engine chose faces to swap in {len(selected)} frame(s) "
                    f"(frame {_listed(sorted(selected))}) but changed none of them"
                )


def _listed(indices: list[int]) -> str:
    shown = ", ".join(str(index) for index in indices[:SHOWN_FRAMES])
    return shown + (f" and {len(indices) - SHOWN_FRAMES} more" if len(indices) > SHOWN_FRAMES else "")
