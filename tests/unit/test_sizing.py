from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from fusionfleet.jobs.sizing import (
    FleetView,
    SizingPolicy,
    WorkCost,
    engine_cost,
    estimated_makespan_s,
    fixed_segment_count,
    plan_for_fleet,
    shortest_segment_frames,
    sized_segment_count,
)

FPS = Fraction(25)
CLASSIC = engine_cost("classic")


def test_two_workers_get_an_even_number_of_segments_for_a_twelve_second_clip() -> None:
    # GIVEN a 12 s clip that the fixed plan cuts into 3 segments (two rounds on two workers)
    assert fixed_segment_count(300, FPS) == 3
    # WHEN it is sized for a fleet of two
    count = sized_segment_count(300, FPS, CLASSIC, FleetView(running=2, maximum=2))
    # THEN both workers finish together: an even count, and the modelled makespan beats the fixed plan's
    assert count % 2 == 0
    assert estimated_makespan_s(300, count, 2, CLASSIC) < estimated_makespan_s(300, 3, 2, CLASSIC)


def test_one_worker_keeps_the_fixed_plan() -> None:
    # GIVEN one worker, nothing to spread over WHEN clips are sized THEN the 4 s plan stands
    for seconds in (8, 12, 60, 180):
        frames = seconds * 25
        assert sized_segment_count(frames, FPS, CLASSIC, FleetView(1, 1)) == fixed_segment_count(frames, FPS)


def test_short_clips_on_a_big_fleet_get_more_shorter_segments() -> None:
    # GIVEN a one-minute clip
    frames = 60 * 25
    # WHEN it is sized for 4 and for 64 workers
    few = sized_segment_count(frames, FPS, CLASSIC, FleetView(0, 4))
    many = sized_segment_count(frames, FPS, CLASSIC, FleetView(0, 64))
    # THEN the big fleet gets more segments, each below the fixed 4 s
    assert many > few
    assert frames / many < 4 * 25


def test_segments_never_shorter_than_their_overhead_allows() -> None:
    # GIVEN a costly fixed part per segment
    cost = WorkCost(seconds_per_frame=0.05, overhead_s=1.5, lead_in_frames=0)
    policy = SizingPolicy(max_overhead_share=0.25)
    # WHEN a 3-minute clip is sized for a huge fleet
    plan = plan_for_fleet(180 * 25, FPS, cost, FleetView(0, 1024), policy)
    # THEN every segment does at least 3× its overhead in frames (share ≤ 25 %)
    shortest = min(s.frame_count for s in plan)
    assert shortest * cost.seconds_per_frame >= 3 * cost.fixed_s() * 0.999
    assert shortest >= shortest_segment_frames(FPS, cost, policy) - 1


def test_long_clips_keep_two_to_five_second_segments() -> None:
    # GIVEN a 30-minute clip WHEN sized for any fleet THEN segments stay within 2..5 s
    for workers in (1, 4, 64, 1024):
        plan = plan_for_fleet(1800 * 25, FPS, CLASSIC, FleetView(0, workers))
        assert all(50 <= s.frame_count <= 125 for s in plan), workers


@pytest.mark.parametrize(("frames", "fps"), [(300, Fraction(25)), (7499, Fraction(30000, 1001)), (1, Fraction(24))])
def test_sized_plans_are_frame_exact(frames: int, fps: Fraction) -> None:
    # GIVEN any clip WHEN sized for a big fleet
    plan = plan_for_fleet(frames, fps, engine_cost("facefusion"), FleetView(3, 64))
    # THEN whole, consecutive frames cover it once, lengths at most one frame apart
    assert plan[0].start_frame == 0 and plan[-1].end_frame == frames
    for before, after in itertools.pairwise(plan):
        assert before.end_frame == after.start_frame
    assert max(s.frame_count for s in plan) - min(s.frame_count for s in plan) <= 1


def test_the_fleet_is_what_runs_or_may_run_whichever_is_more() -> None:
    assert FleetView(running=0, maximum=0).workers == 1
    assert FleetView(running=3, maximum=8).workers == 8
    assert FleetView(running=9, maximum=8).workers == 9


def test_bad_sizing_policy_is_refused() -> None:
    with pytest.raises(ValueError):
        SizingPolicy(min_seconds=6)
    with pytest.raises(ValueError):
        SizingPolicy(max_overhead_share=1.0)
