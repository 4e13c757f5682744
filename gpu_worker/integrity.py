"""Catch an engine that produces something plausible but wrong: black or frozen output."""

from __future__ import annotations

import hashlib

import numpy as np

from fusionfleet.errors import SegmentFailed
from gpu_worker.engines.base import Image

# A frame this dark on average is black; sampled on a coarse grid, so the check costs little.
BLACK_MEAN = 4.0
SAMPLE_STEP = 8


def _fingerprint(image: Image) -> tuple[float, bytes]:
    sample = image[::SAMPLE_STEP, ::SAMPLE_STEP]
    return float(sample.mean()), hashlib.blake2b(np.ascontiguousarray(sample).tobytes(), digest_size=8).digest()


class IntegrityWatch:
    """Fingerprints of input and output frames; `check` fails when the output is black or frozen
    where the input is not."""

    def __init__(self) -> None:
        self._inputs: list[tuple[float, bytes]] = []
        self._outputs: list[tuple[float, bytes]] = []

    def saw_input(self, image: Image) -> None:
        self._inputs.append(_fingerprint(image))

    def saw_output(self, image: Image) -> None:
        self._outputs.append(_fingerprint(image))

    def check(self, what: str) -> None:
        if not self._outputs:
            return
        black_out = all(mean < BLACK_MEAN for mean, _ in self._outputs)
        if black_out and not all(mean < BLACK_MEAN for mean, _ in self._inputs):
            raise SegmentFailed(f"{what}: the engine's output is black where the input is not")
        frozen_out = len({digest for _, digest in self._outputs}) == 1
        if len(self._outputs) > 1 and frozen_out and len({digest for _, digest in self._inputs}) > 1:
            raise SegmentFailed(f"{what}: the engine's output is one frozen picture where the input moves")
