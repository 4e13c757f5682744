"""The integrity watch: quiet bad output from an engine is a failed segment with the reason."""

from __future__ import annotations

import numpy as np
import pytest

from fusionfleet.errors import SegmentFailed
from gpu_worker.rendering.integrity import IntegrityWatch


def frame(level: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.normal(level, 10, (64, 64, 3)), 0, 255).astype(np.uint8)


def watched(inputs: list[np.ndarray], outputs: list[np.ndarray], first: int = 100) -> IntegrityWatch:
    watch = IntegrityWatch()
    for offset, (before, after) in enumerate(zip(inputs, outputs, strict=True)):
        watch.saw_input(before, first + offset)
        watch.saw_output(after)
    return watch


def test_a_stray_black_frame_where_the_input_is_lit_fails_naming_the_frame() -> None:
    inputs = [frame(120, seed) for seed in range(6)]
    outputs = [image.copy() for image in inputs]
    outputs[3] = np.zeros_like(outputs[3])  # what FaceFusion writes for a frame it could not read
    with pytest.raises(SegmentFailed, match=r"1 black frame\(s\) where the input is not black \(frame 103\)"):
        watched(inputs, outputs).check("segment 1")


def test_black_output_for_a_black_input_is_fine() -> None:
    inputs = [frame(120, 1), np.zeros((64, 64, 3), np.uint8), frame(120, 2)]
    watched(inputs, [image.copy() for image in inputs]).check("segment 1")


def test_faces_chosen_but_nothing_changed_fails() -> None:
    inputs = [frame(120, seed) for seed in range(4)]
    watch = watched(inputs, [image.copy() for image in inputs])
    watch.check("segment 1")  # an engine that chose nothing may leave frames as they are
    with pytest.raises(SegmentFailed, match=r"chose faces to swap in 2 frame\(s\) \(frame 101, 102\) but changed none"):
        watch.check("segment 1", frozenset({101, 102}))


def test_faces_chosen_and_changed_pass() -> None:
    inputs = [frame(120, seed) for seed in range(4)]
    outputs = [image.copy() for image in inputs]
    outputs[1][20:40, 20:40] = 255
    watched(inputs, outputs).check("segment 1", frozenset({101, 102}))
