from __future__ import annotations

import pytest

from fusionfleet.fleet.autoscale import (
    Backlog,
    ScalingPolicy,
    ScalingState,
    backlog_target,
    decide,
    wanted_workers,
    workers_to_stop,
)

POLICY = ScalingPolicy(minimum=1, maximum=8, backlog_per_worker=2, scale_out_cooldown_s=5, scale_in_cooldown_s=30)


def test_the_target_is_what_one_worker_clears_within_the_acceptable_latency() -> None:
    # GIVEN 10 s segments and a minute of acceptable wait THEN a worker may have 6 ahead of it
    assert backlog_target(60, 10) == 6
    # AND never fewer than one
    assert backlog_target(5, 10) == 1
    with pytest.raises(ValueError):
        backlog_target(0, 10)


def test_backlog_per_worker_counts_segments_in_flight() -> None:
    # GIVEN 4 segments waiting and 6 being rendered, 2 per worker
    # THEN 5 workers are wanted (not 2: the busy ones are not surplus)
    assert wanted_workers(Backlog(waiting=4, in_flight=6), POLICY) == 5


def test_a_burst_is_capped_at_the_maximum_and_idleness_returns_to_the_minimum() -> None:
    assert wanted_workers(Backlog(waiting=100, in_flight=0), POLICY) == 8
    assert wanted_workers(Backlog(waiting=0, in_flight=0), POLICY) == 1


def test_one_waiting_segment_activates_a_fleet_at_zero_at_once() -> None:
    # GIVEN a fleet scaled to zero that has just scaled (inside every cooldown)
    policy = ScalingPolicy(minimum=0, maximum=8, backlog_per_worker=4)
    state = ScalingState(desired=0, last_scale_out_at=100.0, last_change_at=100.0)
    # WHEN one segment waits THEN one worker is wanted now
    decision = decide(Backlog(waiting=1, in_flight=0), state, policy, now=101.0)
    assert decision.desired == 1
    # AND an empty queue scales it back to zero once the scale-in cooldown has passed
    assert decide(Backlog(0, 0), ScalingState(1, 101.0, 101.0), policy, now=200.0).desired == 0


def test_cooldowns_hold_a_second_scale_out_and_an_early_scale_in() -> None:
    state = ScalingState(desired=2, last_scale_out_at=100.0, last_change_at=100.0)
    # WHEN more work arrives 2 s after a scale-out THEN the fleet holds, and says why
    held = decide(Backlog(waiting=16, in_flight=2), state, POLICY, now=102.0)
    assert (held.desired, held.wanted) == (2, 8)
    assert "cooling" in held.reason
    # AND after the cooldown it grows to what the backlog asks
    assert decide(Backlog(waiting=16, in_flight=2), state, POLICY, now=106.0).desired == 8
    # AND the queue emptying 10 s after a change does not shrink it yet; 30 s after does
    assert decide(Backlog(0, 0), state, POLICY, now=110.0).desired == 2
    assert decide(Backlog(0, 0), state, POLICY, now=131.0).desired == 1


def test_a_decision_records_when_it_scaled() -> None:
    state = ScalingState(desired=1)
    grown = decide(Backlog(10, 0), state, POLICY, now=50.0)
    after = grown.state_after(state, 50.0)
    assert (after.desired, after.last_scale_out_at, after.last_change_at) == (5, 50.0, 50.0)
    shrunk = decide(Backlog(0, 0), after, POLICY, now=90.0).state_after(after, 90.0)
    assert (shrunk.desired, shrunk.last_scale_out_at, shrunk.last_change_at) == (1, 50.0, 90.0)


def test_scale_in_stops_only_idle_workers() -> None:
    # GIVEN 5 running, 2 of them idle, and 1 desired THEN only the 2 idle ones stop
    assert workers_to_stop(1, 5, ["w2", "w4"]) == ["w2", "w4"]
    # AND never more than the surplus
    assert workers_to_stop(4, 5, ["w2", "w4"]) == ["w2"]
    assert workers_to_stop(5, 5, ["w2"]) == []


def test_bad_policies_are_refused() -> None:
    with pytest.raises(ValueError):
        ScalingPolicy(minimum=3, maximum=2)
    with pytest.raises(ValueError):
        ScalingPolicy(minimum=0, maximum=2, backlog_per_worker=0)
