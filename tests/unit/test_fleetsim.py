"""The fleet simulation runs the project's own planner and scaling rule, and behaves as a farm should."""

from __future__ import annotations

from dataclasses import replace

from benchmarks.fleetsim.model import Costs, Farm, FleetConfig, JobSpec
from benchmarks.fleetsim.scenarios import COSTS, INPUTS, fairness, p95, single_job, stragglers
from fusionfleet.fleet.autoscale import ScalingPolicy


def test_sized_plans_finish_a_short_clip_sooner_on_two_workers() -> None:
    # GIVEN a 12 s clip on two GPUs, segments costing the farm's own overhead (320×180: media costs almost
    # nothing), WHEN planned fixed (3 segments) and sized (4 segments)
    engine = replace(COSTS.engine, overhead_s=INPUTS["per_segment_overhead_320x180_s"].value)
    costs = replace(COSTS, engine=engine)
    fixed = single_job(2, adaptive=False, seconds=12, costs=costs)
    sized = single_job(2, adaptive=True, seconds=12, costs=costs)
    # THEN the sized plan renders in fewer rounds
    assert (fixed["segments"], sized["segments"]) == (3, 4)
    assert sized["render_s"] < fixed["render_s"]


def test_high_priority_overtakes_a_deep_low_backlog() -> None:
    # GIVEN one worker, 40 low segments queued first, then a high job
    farm = Farm(COSTS, FleetConfig(fixed_workers=1, adaptive_segments=False))
    low = JobSpec("low", 0.0, 160 * 30, 30, "low")
    high = JobSpec("high", 30.0, 8 * 30, 30, "high")
    farm.run([low, high])
    # THEN its first segment waits at most the low segment in work, its second also its own first,
    # far less than the low ones wait
    segment_s = 4 * 30 * COSTS.engine.seconds_per_frame + COSTS.engine.fixed_s()
    first, second = farm.results["high"].waits
    assert first <= segment_s
    assert second <= 2 * segment_s
    assert p95(farm.results["low"].waits) > 10 * segment_s
    assert farm.results["high"].done_s < farm.results["low"].done_s


def test_the_autoscaled_fleet_grows_with_a_burst_and_returns_to_the_minimum() -> None:
    # GIVEN a fleet of 1..8 workers that boot in 30 s, deciding every 10 s
    policy = ScalingPolicy(1, 8, backlog_per_worker=2, scale_out_cooldown_s=10, scale_in_cooldown_s=60)
    farm = Farm(COSTS, FleetConfig(policy=policy, scale_every_s=10, boot_s=30))
    # WHEN a 5-minute clip arrives
    farm.run([JobSpec("burst", 0.0, 300 * 30, 30, "normal")], until_s=3600)
    running = [n for _t, n, _d in farm.totals.fleet_samples]
    # THEN the fleet reached its maximum, finished the job and came back to one worker
    assert max(running) == 8
    assert farm.results["burst"].done_s > 0
    assert running[-1] == 1
    # AND every worker stopped was billed only until it stopped
    assert farm.billed_until(3600) < 8 * 3600


def test_a_fair_share_lets_a_small_job_through_a_big_ones_queue() -> None:
    # GIVEN a 30-minute job and, 20 s later, a 30 s job of the same priority on 16 GPUs
    result = fairness(16)
    # THEN with per-job concurrency capped the small job's segments wait several times less, and it is
    # done well sooner (its turnaround also holds the fixed start, merge and notice fairness cannot cut)
    assert result["on"]["small_wait_p95_s"] * 3 < result["off"]["small_wait_p95_s"]
    assert result["on"]["small_turnaround_s"] * 2 < result["off"]["small_turnaround_s"]
    # AND the big job pays little for it
    assert result["on"]["big_turnaround_s"] < 1.05 * result["off"]["big_turnaround_s"]


def test_backup_copies_cut_the_tail_that_a_very_slow_host_makes() -> None:
    # GIVEN a 3-minute job on 64 GPUs, 5 % of them 10x slow
    result = stragglers(64, 180, 0.05, 10.0, seeds=range(1, 3))
    # THEN backup copies are made, win, and the job renders much sooner
    assert result["on"]["won"] > 0 and result["off"]["copies"] == 0
    assert result["on"]["render_s_mean"] < 0.8 * result["off"]["render_s_mean"]


def test_without_slow_hosts_no_copy_is_made() -> None:
    result = stragglers(16, 120, 0.0, 3.0, seeds=range(1, 2))
    assert result["on"]["copies"] == 0
    assert result["on"]["render_s_mean"] == result["off"]["render_s_mean"]


def without_and_with_lookahead(costs: Costs) -> tuple[Farm, Farm]:
    """A 2-minute job on 4 workers in fixed 4 s segments, with lookahead off and then at 2."""
    farms = []
    for threshold in (0, 2):
        farm = Farm(costs, FleetConfig(fixed_workers=4, adaptive_segments=False, lookahead_min_backlog=threshold))
        farm.run([JobSpec("job", 0.0, 120 * 30, 30, "normal")])
        farms.append(farm)
    return farms[0], farms[1]


def test_taking_the_next_segment_early_hides_its_head_overhead_and_renders_each_segment_once() -> None:
    # GIVEN a 2-minute job on 4 workers in fixed 4 s segments, and 0.4 s of each segment's overhead
    # spent before its engine starts
    costs = replace(COSTS, head_s=0.4, tail_s=0.0)
    off, on = without_and_with_lookahead(costs)
    # THEN with lookahead the job renders sooner, by about the hidden head of every segment but each
    # worker's first and the ones taken from a shallow backlog
    segments = off.results["job"].segments
    saved = off.results["job"].last_end_s - on.results["job"].last_end_s
    assert 0.4 * (segments / 4 - 3) <= saved <= 0.4 * segments / 4 + 0.01
    # AND the same engine time was spent: no segment rendered twice
    assert on.totals.engine_s == off.totals.engine_s
    assert on.results["job"].segments == segments


def test_finishing_in_the_background_hides_the_tail_of_every_segment_but_the_last_ones() -> None:
    # GIVEN a 2-minute job on 4 workers in fixed 4 s segments, 0.3 s of each segment's overhead spent
    # after its last frame (join, check, upload, commit) and none before its engine starts
    costs = replace(COSTS, head_s=0.0, tail_s=0.3)
    off, on = without_and_with_lookahead(costs)
    # THEN with lookahead each worker's next segment starts while the last one finishes: the job is done
    # sooner by about one tail per segment a worker rendered after its first
    per_worker = off.results["job"].segments / 4
    saved = off.results["job"].last_end_s - on.results["job"].last_end_s
    assert 0.3 * (per_worker - 2) <= saved <= 0.3 * per_worker + 0.01
    # AND the GPU-idle overhead counted drops by the tail of every segment, with the same engine time
    assert on.totals.engine_s == off.totals.engine_s
    assert abs(off.totals.overhead_s - on.totals.overhead_s - 0.3 * off.results["job"].segments) < 1e-6
