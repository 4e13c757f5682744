from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from fusionfleet.jobs.plan import (
    SegmentPolicy,
    cut_at_frames,
    cut_segments,
    frame_time_us,
    plan_segments,
    requested_plan_problem,
    segment_count,
)


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


def test_a_manifests_own_plan_cuts_where_it_says_and_covers_every_frame() -> None:
    # GIVEN a 10 s clip of frames 0..249 WHEN cut at frames 126 and 200
    plan = cut_at_frames((126, 200), 250, Fraction(25))
    # THEN three segments start at 0, 126 and 200, end to end, with exact times
    assert [(s.start_frame, s.end_frame) for s in plan] == [(0, 126), (126, 200), (200, 250)]
    assert plan[1].start_time_us == 5_040_000
    # AND a trimmed range starts at its first frame
    assert [(s.start_frame, s.end_frame) for s in cut_at_frames((30,), 60, Fraction(25), first=20)] == [
        (20, 30),
        (30, 80),
    ]


@pytest.mark.parametrize(
    ("segments", "cuts", "frames", "first", "why"),
    [
        (4, (), 7, 0, "4 segments of at least 2 frames do not fit the job's 7 frames"),
        (0, (), 100, 0, "0 segments"),
        (2, (50,), 100, 0, "not both"),
        (None, (50, 40), 100, 0, "cuts must rise"),
        (None, (99,), 100, 0, "cuts must rise"),
        (None, (10,), 90, 10, "within the job's frames [10, 100)"),
    ],
)
def test_a_plan_that_cannot_be_cut_says_why(
    segments: int | None, cuts: tuple[int, ...], frames: int, first: int, why: str
) -> None:
    problem = requested_plan_problem(segments, cuts, frames, first)
    assert problem is not None and why in problem


def test_a_plan_of_n_segments_fits_any_clip_of_2n_frames() -> None:
    # GIVEN 4 segments asked of a 10 s clip (a fixed plan would make 2) THEN four, of 2 frames at least
    assert requested_plan_problem(4, (), 8) is None
    assert len(cut_segments(250, Fraction(25), 4)) == 4
