"""The fixed-cost benchmark's estimator: one for both FaceFusion engines (benchmarks/facefusion_fixed_cost.py)."""

from __future__ import annotations

import pytest

from benchmarks.facefusion_fixed_cost import fixed_and_per_frame


def test_the_intercept_and_slope_come_from_each_lengths_fastest_segment() -> None:
    # GIVEN segments of 4, 8 and 16 frames costing 2 s + 0.1 s a frame, with slower repeats beside them
    times = {4: [2.4, 3.9, 2.4], 8: [2.8, 2.9], 16: [5.0, 3.6]}
    # WHEN the fixed cost is estimated THEN it is the line through the fastest ones
    fixed, per_frame = fixed_and_per_frame(times)
    assert fixed == pytest.approx(2.0) and per_frame == pytest.approx(0.1)


def test_a_noisy_fit_is_reported_as_it_came_out_not_clamped() -> None:
    # GIVEN longer segments that came out faster (a busy machine) WHEN estimated THEN the slope stays negative
    fixed, per_frame = fixed_and_per_frame({4: [5.0], 8: [4.9], 16: [4.6]})
    assert per_frame < 0 and fixed > 5.0
