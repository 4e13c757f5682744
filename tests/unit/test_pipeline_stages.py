"""The pipelined segment's parts that need no media: memory budgets per size, hand-offs that never block
past a failure, stage clocks."""

from __future__ import annotations

import threading

import pytest

from gpu_worker.rendering.chunk_encoder import frames_behind
from gpu_worker.rendering.handoff import Handoff, PipelineStop, Stopped, queue_frames
from gpu_worker.rendering.stage_clock import STAGES, StageClock, occupancy

MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("width", "height", "frames"),
    [(320, 180, 16), (640, 360, 16), (1920, 1080, 16), (3840, 2160, 5), (7680, 4320, 2)],
)
def test_a_queue_holds_what_its_byte_budget_allows_within_its_bounds(width: int, height: int, frames: int) -> None:
    assert frames_behind(width, height) == frames
    # AND never more than the budget, except the two frames every stage needs to overlap at all
    assert frames * width * height * 3 <= 128 * MIB or frames == 2


def test_queue_frames_is_bounded_both_ways() -> None:
    assert queue_frames(0, 100, most=16) == 16
    assert queue_frames(1000, 10, most=16) == 2
    assert queue_frames(10, 100, most=16) == 10


def test_a_blocked_put_gives_up_with_the_failure_of_another_stage() -> None:
    # GIVEN a full hand-off whose consumer failed
    stop = PipelineStop()
    handoff: Handoff[int] = Handoff(1, stop)
    handoff.put(1)
    threading.Timer(0.2, stop.fail, args=(ValueError("the encoder died"),)).start()
    # WHEN the producer hands on another item, THEN it stops instead of waiting for ever
    with pytest.raises(Stopped):
        handoff.put(2)
    # AND the failure that stopped it is the one raised
    with pytest.raises(ValueError, match="the encoder died"):
        stop.raise_failure()


def test_a_blocked_get_says_how_long_it_waited() -> None:
    stop = PipelineStop()
    handoff: Handoff[str] = Handoff(2, stop)
    threading.Timer(0.2, handoff.put, args=("frame",)).start()
    item, waited, moved = handoff.get()
    assert item == "frame" and 0.15 < waited < 2 and moved == 0.0


def test_only_the_first_failure_is_kept() -> None:
    stop = PipelineStop()
    stop.fail(KeyError("first"))
    stop.fail(ValueError("second"))
    with pytest.raises(KeyError):
        stop.raise_failure()


def test_the_clock_adds_seconds_per_stage_and_refuses_unknown_stages() -> None:
    clock = StageClock()
    clock.add("engine", 1.5)
    clock.add("engine", 0.5)
    with clock.timed("decode"):
        pass
    snapshot = clock.snapshot()
    assert set(snapshot) == set(STAGES) and snapshot["engine"] == 2.0 and snapshot["decode"] >= 0
    with pytest.raises(KeyError):
        clock.add("gpu", 1.0)
    assert occupancy(snapshot, 4.0) == 0.5 and occupancy(snapshot, 0.0) == 0.0
