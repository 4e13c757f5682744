from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from fusionfleet.jobs.plan import SegmentPolicy, frame_time_us, plan_segments, segment_count


@pytest.mark.parametrize(
    ("frames", "fps"),
    [(250, Fraction(25)), (1, Fraction(25)), (7499, Fraction(30000, 1001)), (90_001, Fraction(60)), (37, Fraction(24))],
)
def test_segments_cover_every_frame_exactly_once(frames: int, fps: Fraction) -> None:
    # GIVEN a video of `frames` frames
    # WHEN it is planned
    plan = plan_segments(frames, fps)
    # THEN segments are consecutive, non-empty, start at 0 and end at the last frame
    assert plan[0].start_frame == 0
    assert plan[-1].end_frame == frames
    for before, after in itertools.pairwise(plan):
        assert before.end_frame == after.start_frame
    assert all(s.frame_count > 0 for s in plan)
    assert [s.index for s in plan] == list(range(len(plan)))


def test_segment_lengths_stay_within_two_and_five_seconds() -> None:
    # GIVEN a three-minute 25 fps video
    plan = plan_segments(180 * 25, Fraction(25))
    # THEN every segment lasts 2..5 s and lengths differ by at most one frame
    lengths = {s.frame_count for s in plan}
    assert all(50 <= n <= 125 for n in lengths)
    assert max(lengths) - min(lengths) <= 1
    assert len(plan) == 45  # 4 s target


def test_short_video_is_one_segment() -> None:
    assert len(plan_segments(30, Fraction(25))) == 1


def test_times_are_exact_for_ntsc_rates() -> None:
    # GIVEN 29.97 fps WHEN frame 30000 starts THEN it is at exactly 1001 s
    assert frame_time_us(30000, Fraction(30000, 1001)) == 1_001_000_000
    plan = plan_segments(3000, Fraction(30000, 1001))
    assert plan[1].start_time_us == frame_time_us(plan[1].start_frame, Fraction(30000, 1001))


def test_count_prefers_the_target_length() -> None:
    policy = SegmentPolicy(target_seconds=3, min_seconds=2, max_seconds=5)
    assert segment_count(25 * 30, Fraction(25), policy) == 10


def test_bad_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="segment seconds"):
        SegmentPolicy(target_seconds=1, min_seconds=2, max_seconds=5)
    with pytest.raises(ValueError):
        plan_segments(0, Fraction(25))
