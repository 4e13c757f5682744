"""A test render's plan (fusionfleet.jobs.trial): each frame warmed from the frames its engine's output for it
depends on (fusionfleet.jobs.decisions.CONTEXT), and those declarations held to the engines themselves."""

from __future__ import annotations

from fractions import Fraction

import pytest

from fusionfleet.jobs.decisions import CONTEXT, context_frames, tracker_window
from fusionfleet.jobs.manifest import ENGINE_NAMES
from fusionfleet.jobs.plan import Segment, plan_segments
from fusionfleet.jobs.timeline import timeline
from fusionfleet.jobs.trial import spread_frames, trial_plan, trimmed_frames_problem
from gpu_worker.engines.base import CarriesState, LooksAhead
from gpu_worker.engines.facefusion import FaceFusionEngine, WarmFaceFusionEngine
from gpu_worker.engines.facefusion.job_options import look_ahead
from gpu_worker.engines.registry import create_engine

FPS = Fraction(25)
TRACKER = {"face_tracker_score": 0.3}  # FaceFusion's tracker on, its window the default 2 frames


@pytest.mark.parametrize(
    ("count", "start", "end", "expected"),
    [
        (5, 0, 100, (0, 25, 50, 74, 99)),  # first and last included, the rest to the nearest frame
        (8, 0, 30, (0, 4, 8, 12, 17, 21, 25, 29)),
        (5, 10, 50, (10, 20, 30, 39, 49)),  # a trimmed range: its own first and last
        (1, 0, 30, (14,)),  # one: the middle
        (16, 0, 4, (0, 1, 2, 3)),  # more than the range holds: each of its frames once
        (0, 0, 30, ()),
    ],
)
def test_a_poster_strips_frames_are_spread_evenly_over_the_range(
    count: int, start: int, end: int, expected: tuple[int, ...]
) -> None:
    assert spread_frames(count, start, end) == expected


def warm_froms(plan: tuple[Segment, ...]) -> list[tuple[int, int]]:
    return [(s.start_frame, s.engine_start) for s in plan]


def test_a_stateless_engines_frame_warms_from_its_context_before_it() -> None:
    # GIVEN a 30 s clip's full plan (8 segments of 93 or 94 frames: 94, 188, ..., 657) and FaceFusion with its
    # tracker on, whose frame depends on the 2 frames each side of it
    full = plan_segments(750, FPS)
    context = context_frames("facefusion", TRACKER)
    assert context == 2
    # WHEN frames late in their segments are asked for
    plan = trial_plan([120, 749, 300], full, 25, 1, context)
    # THEN each engine run starts 2 frames before its frame, not at its segment's start (94, 657, 282)
    assert warm_froms(plan) == [(120, 118), (749, 747), (300, 298)]
    assert [(s.index, s.end_frame, s.warm_from) for s in plan] == [(0, 121, 118), (1, 750, 747), (2, 301, 298)]


def test_without_the_tracker_or_any_state_the_frame_alone_is_rendered() -> None:
    full = plan_segments(750, FPS)
    for engine, options in (("facefusion", {}), ("facefusion", {"face_tracker_score": 0}), ("copy", TRACKER)):
        context = context_frames(engine, options)
        assert context == 0, (engine, options)
        assert warm_froms(trial_plan([120, 749], full, 25, 1, context)) == [(120, 120), (749, 749)]


def test_a_stateful_engines_frame_warms_from_its_segments_start() -> None:
    # GIVEN the classic engine, whose tracker and colour filters run from its segment's start
    full = plan_segments(750, FPS)
    context = context_frames("classic", TRACKER)
    assert context is None
    # THEN its frames warm from their full-plan segments' starts, as before
    plan = trial_plan([0, 120, 749], full, 25, 1, context)
    assert warm_froms(plan) == [(0, 0), (120, 94), (749, 657)]
    assert plan == trial_plan([0, 120, 749], full, 25, 1)
    # AND an engine nobody declared is taken to carry state
    assert context_frames("someone-elses", {}) is None


def test_a_window_reaching_before_its_segment_stops_at_the_segments_start() -> None:
    # The full render's run of that segment starts there too (after its lead-in, as the test render's does).
    full = plan_segments(750, FPS)
    wide = context_frames("facefusion", {**TRACKER, "target_frame_amount": 30})
    assert wide == 30
    assert warm_froms(trial_plan([100, 130, 200], full, 25, 1, wide)) == [(100, 94), (130, 100), (200, 188)]


def test_at_the_clips_start() -> None:
    full = plan_segments(750, FPS)
    assert warm_froms(trial_plan([0, 1, 2, 3], full, 25, 1, 2)) == [(0, 0), (1, 0), (2, 0), (3, 1)]


def test_with_a_trim_the_window_stops_at_the_trims_start() -> None:
    # GIVEN a job trimmed to frames [100, 600) of its 750: its full plan starts at frame 100
    frames = timeline({"trim_frame_start": 100, "trim_frame_end": 600}, 750, FPS)
    full = plan_segments(frames.frames, FPS, None, frames.start)
    assert full[0].start_frame == 100 and full[-1].end_frame == 600
    # THEN a frame just after the trim's start warms from the trim's start (the full render's first segment's,
    # whose lead-in before it the worker feeds to both), one further on from its window, and the classic
    # engine's from its segment's start
    plan = trial_plan([100, 101, 150, 599], full, 25, 1, 2)
    assert warm_froms(plan) == [(100, 100), (101, 100), (150, 148), (599, 597)]
    holder = next(s for s in full if s.start_frame <= 599 < s.end_frame)
    assert warm_froms(trial_plan([101, 599], full, 25, 1, None)) == [(101, 100), (599, holder.start_frame)]


@pytest.mark.parametrize("k", range(0, 750, 7))
def test_the_frames_window_is_always_within_the_frames_the_engine_sees(k: int) -> None:
    # Frame k's output depends on frames [k - context, k + context]: the run starts at or before the window's
    # near side, and never before the full render's run of the same segment.
    full = plan_segments(750, FPS)
    (segment,) = trial_plan([k], full, 25, 1, 5)
    holder = next(s for s in full if s.start_frame <= k < s.end_frame)
    assert holder.start_frame <= segment.engine_start <= k
    assert segment.engine_start == holder.start_frame or segment.engine_start == k - 5


def test_every_engines_declaration_holds_to_the_engine() -> None:
    assert set(CONTEXT) == set(ENGINE_NAMES)
    # The classic engine carries its tracker and filters from frame to frame: it must declare None.
    classic = create_engine("classic", {})
    assert isinstance(classic, CarriesState) and context_frames("classic", {}) is None
    # The copy engine's state is empty: it may (and does) declare that a frame needs nothing before it.
    copy = create_engine("copy", {})
    assert isinstance(copy, CarriesState) and copy.save_state() == b"" and context_frames("copy", {}) == 0
    # FaceFusion (warm or per segment) carries no state; its output depends on its tracker's window, both ways:
    # the worker's lead-out is that window's far side, the plan's context its near side.
    for engine_class in (WarmFaceFusionEngine, FaceFusionEngine):
        assert not hasattr(engine_class, "save_state") and hasattr(engine_class, "lead_out_frames"), engine_class
        assert issubclass(engine_class, LooksAhead)
    for options in ({}, TRACKER, {**TRACKER, "target_frame_amount": 0}, {**TRACKER, "target_frame_amount": 7}):
        assert context_frames("facefusion", options) == tracker_window(options) == look_ahead(options)


def test_a_frame_the_trim_leaves_out_is_refused_with_the_reason() -> None:
    # GIVEN a job of target frames [20, 280) WHEN a test render asks for frames 10, 25 and 280
    problem = trimmed_frames_problem([10, 25, 280], 20, 280)
    # THEN the two outside the range are named (the slicer used to stop on them with a bare StopIteration)
    assert problem is not None and problem.startswith("frames: 10, 280 outside the job's trimmed range")
    assert trimmed_frames_problem([20, 279], 20, 280) is None
