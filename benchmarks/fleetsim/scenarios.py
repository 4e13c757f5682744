"""The simulated scenarios behind issue 10's goals, and their measures.

Every input is either MEASURED, with the results file it came from (`Measured`: the fleet-overhead
benchmark's figures are recomputed from that file's runs by `benchmarks.fleet_overhead.calibration`,
and tests/unit/test_fleetsim_inputs.py checks they still agree), or an ESTIMATE that says why
(`Estimate`: no GPU and no AWS account here). `python -m benchmarks.fleetsim` writes both lists into
its results file.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, replace
from typing import Any

from benchmarks.fleetsim.model import Costs, Farm, FleetConfig, JobSpec
from fusionfleet.fleet.autoscale import AWS_COOLDOWNS, ScalingPolicy, backlog_target
from fusionfleet.jobs.sizing import WorkCost


@dataclass(frozen=True)
class Measured:
    value: float
    file: str  # under benchmarks/results/
    what: str  # the key of benchmarks.fleet_overhead.calibration, or how it was derived from the file


@dataclass(frozen=True)
class Estimate:
    value: float
    why: str


# The final code with its default configuration (lookahead off; the simulation models lookahead itself).
OVERHEAD_FILE = "fleet-overhead-lookahead-off.json"
# The 1080p per-segment overhead (benchmarks/occupancy.py, `--sizes 1920x1080 --lookahead 0`).
OCCUPANCY_FILE = "occupancy-1080p-lookahead-off-run4.json"
INPUTS: dict[str, Measured | Estimate] = {
    # The local stack, a sleep engine, 320×180 frames, 1, 6 and 12 workers (benchmarks/fleet_overhead.py).
    "job_start_s": Measured(0.738, OVERHEAD_FILE, "job_start_s"),
    "dispatch_s": Measured(0.013, OVERHEAD_FILE, "dispatch_s"),
    # A segment's cost on its worker beyond the engine, at 1080p with its media (decode start, encode tail,
    # join, check, upload: make bench-occupancy, one worker, lookahead off, CPU x264 on 2 cores, the last run):
    # what the headline's 1080p segments pay. A GPU host with NVENC pays less media (not measured here).
    "per_segment_overhead_s": Measured(2.112, OCCUPANCY_FILE, "overhead_per_segment_1920x1080_s"),
    # The same at 320×180 (media costs almost nothing): the farm's own part, kept for comparison.
    "per_segment_overhead_320x180_s": Measured(0.359, OVERHEAD_FILE, "per_segment_overhead_alone_s"),
    "to_merge_s": Measured(0.112, OVERHEAD_FILE, "to_merge_s"),
    "merge_base_s": Measured(0.022, OVERHEAD_FILE, "merge_base_s"),
    "merge_per_segment_s": Measured(0.025, OVERHEAD_FILE, "merge_per_segment_s"),
    "notice_s": Measured(0.37, OVERHEAD_FILE, "notice_s"),
    # What a worker that looks ahead hides of each segment's overhead (3 workers, 2 s sleep engine,
    # 128×72 frames): the engine's free time between segments fell from 0.34 / 0.25 s (p50, off) to
    # 0.07 / 0.08 s (on), 0.22 s on average; of it the finish after the last frame (join, check,
    # upload, commit) took 0.10 s (p50, off), the rest is the loop's work before the next render.
    "head_s": Measured(0.12, "throughput-finish.json", "engine_free_between_segments_s p50 off − on, less the finish"),
    "tail_s": Measured(0.10, "throughput-finish.json", "finish_s p50, lookahead off"),
    "facefusion_s_per_1080p_frame": Estimate(0.05, "FaceFusion on one A10G at 1080p, about 20 frames/s; no GPU here"),
    # The seed's headline job: a 3-minute 1080p clip that takes 12 minutes on one GPU.
    "seed_s_per_frame": Estimate(720 / (180 * 30), "the seed's own figure: 12 minutes for 5400 frames on one GPU"),
    "aws_dispatch_s": Estimate(
        0.01, "Step Functions on AWS starts a Distributed Map's child executions many at a time; not measured"
    ),
    "gpu_boot_s": Estimate(180.0, "an ECS GPU task's start with its image cached; not measured"),
    "spot_interruptions_per_gpu_hour": Estimate(0.02, "Spot's published interruption frequency, < 5 %"),
}


def value(name: str) -> float:
    return INPUTS[name].value


def described(kind: type[Measured] | type[Estimate]) -> dict[str, dict[str, Any]]:
    """The inputs of one kind, with where each came from (for the results file)."""
    return {name: vars(item) for name, item in INPUTS.items() if isinstance(item, kind)}


COSTS = Costs(
    engine=WorkCost(
        seconds_per_frame=value("facefusion_s_per_1080p_frame"),
        overhead_s=value("per_segment_overhead_s"),
        lead_in_frames=0,
    ),
    job_start_s=value("job_start_s"),
    dispatch_s=value("dispatch_s"),
    merge_base_s=value("merge_base_s"),
    merge_per_segment_s=value("merge_per_segment_s"),
    head_s=value("head_s"),
    tail_s=value("tail_s"),
    to_merge_s=value("to_merge_s"),
    notice_s=value("notice_s"),
)
AWS_DISPATCH_S = value("aws_dispatch_s")
FPS = 30
LOW_BULK_JOBS = 600
ACCEPTABLE_LATENCY_S = 60.0
# Workers' lookahead (FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG) in the day's lookahead variants.
LOOKAHEAD = 2


def p95(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


# ---------------------------------------------------------------- one job, many GPUs
def single_job(workers: int, adaptive: bool, seconds: int = 180, costs: Costs = COSTS) -> dict[str, Any]:
    farm = Farm(costs, FleetConfig(fixed_workers=workers, adaptive_segments=adaptive))
    job = JobSpec("job", 0.0, seconds * FPS, FPS, "normal")
    farm.run([job])
    result = farm.results["job"]
    return {
        "workers": workers,
        "segments": result.segments,
        "render_s": result.last_end_s - result.first_start_s,
        "end_to_end_s": result.done_s,
    }


def parallel_efficiency(workers: int, adaptive: bool, seconds: int = 180, costs: Costs = COSTS) -> dict[str, Any]:
    """T(1) / (N × T(N)); T(1) is one GPU with the fixed plan (the best a single GPU does here)."""
    one = single_job(1, adaptive=False, seconds=seconds, costs=costs)
    many = single_job(workers, adaptive, seconds, costs)
    return {
        **many,
        "one_gpu_render_s": one["render_s"],
        "one_gpu_end_to_end_s": one["end_to_end_s"],
        "efficiency_render": one["render_s"] / (workers * many["render_s"]),
        "efficiency_end_to_end": one["end_to_end_s"] / (workers * many["end_to_end_s"]),
    }


# ---------------------------------------------------------------- a mixed day
def mixed_day(seed: int = 7) -> list[JobSpec]:
    """Many users over 24 h: clips of 30 s to 30 min (log-uniform), high/normal through working hours,
    and a bulk of low-priority jobs dropped at 08:00 that keeps the low queue hours deep."""
    rng = random.Random(seed)
    jobs: list[JobSpec] = []
    t = 0.0
    while t < 24 * 3600:
        hour = t / 3600
        rate_per_h = 40 if 8 <= hour < 20 else 8  # interactive jobs an hour
        t += rng.expovariate(rate_per_h / 3600)
        seconds = math.exp(rng.uniform(math.log(30), math.log(1800)))
        priority = "high" if rng.random() < 0.15 else "normal"
        jobs.append(JobSpec(f"{priority}-{len(jobs)}", t, int(seconds * FPS), FPS, priority))
    for number in range(LOW_BULK_JOBS):
        seconds = math.exp(rng.uniform(math.log(30), math.log(1800)))
        jobs.append(JobSpec(f"low-{number}", 8 * 3600 + number, int(seconds * FPS), FPS, "low"))
    return jobs


def day_policy(maximum: int, latency_s: float = ACCEPTABLE_LATENCY_S) -> ScalingPolicy:
    # Segments of ~4 s of 1080p: 6 s of engine time + 1 s of overhead each.
    target = backlog_target(latency_s, 4 * FPS * COSTS.engine.seconds_per_frame + COSTS.engine.fixed_s())
    return ScalingPolicy(0, maximum, target, *AWS_COOLDOWNS)


def run_day(
    *,
    maximum: int = 64,
    boot_s: float = value("gpu_boot_s"),
    adaptive: bool = True,
    spot_per_hour: float = value("spot_interruptions_per_gpu_hour"),
    latency_s: float = ACCEPTABLE_LATENCY_S,
    lookahead: int = 0,
    seed: int = 7,
) -> dict[str, Any]:
    jobs = mixed_day(seed=seed)
    fleet = FleetConfig(
        policy=day_policy(maximum, latency_s),
        scale_every_s=60.0,
        boot_s=boot_s,
        spot_interruptions_per_hour=spot_per_hour,
        adaptive_segments=adaptive,
        lookahead_min_backlog=lookahead,
    )
    farm = Farm(COSTS, fleet, seed=seed)
    farm.run(jobs)
    end = max(r.done_s for r in farm.results.values())
    billed = farm.billed_until(end)
    waits = {p: [w for r in farm.results.values() if r.spec.priority == p for w in r.waits] for p in ("high", "low")}
    low_deep = _low_backlog_hours(farm)
    high_during = [
        w
        for r in farm.results.values()
        if r.spec.priority == "high" and low_deep[0] <= r.spec.submit_s <= low_deep[1]
        for w in r.waits
    ]
    turnaround = [r.done_s - r.spec.submit_s for r in farm.results.values() if r.spec.priority == "high"]
    return {
        "jobs": len(jobs),
        "segments": sum(r.segments for r in farm.results.values()),
        "hours_simulated": end / 3600,
        "gpu_billed_h": billed / 3600,
        "gpu_engine_h": farm.totals.engine_s / 3600,
        "gpu_busy_share": farm.totals.engine_s / billed,
        "worker_busy_share": (farm.totals.engine_s + farm.totals.overhead_s) / billed,
        "spot_interruptions": farm.totals.interruptions,
        "peak_workers": max(running for _t, running, _d in farm.totals.fleet_samples),
        "low_backlog_window_h": [low_deep[0] / 3600, low_deep[1] / 3600],
        "low_wait_max_h": max(waits["low"], default=0) / 3600,
        "high_segment_wait_p95_s": p95(high_during),
        "high_segment_wait_p95_all_day_s": p95(waits["high"]),
        "high_turnaround_median_s": statistics.median(turnaround) if turnaround else 0.0,
    }


def _low_backlog_hours(farm: Farm) -> tuple[float, float]:
    """From the low bulk's drop until its last segment started: the low queue is hours deep then."""
    lows = [r for r in farm.results.values() if r.spec.priority == "low"]
    start = min(r.spec.submit_s for r in lows)
    last_start = max(r.spec.submit_s + max(r.waits, default=0) for r in lows)
    return start, last_start


def efficiency_curve(workers: tuple[int, ...] = (4, 8, 16, 32, 64, 128, 256, 512, 1024)) -> list[dict[str, Any]]:
    """A 3-minute 1080p job on N GPUs: fixed vs adaptive plans, LocalStack's and AWS's dispatch rates."""
    aws = replace(COSTS, dispatch_s=AWS_DISPATCH_S)
    rows = []
    for n in workers:
        for adaptive in (False, True):
            for dispatch, costs in (("localstack", COSTS), ("aws-estimate", aws)):
                row = parallel_efficiency(n, adaptive, costs=costs)
                rows.append({**row, "plan": "adaptive" if adaptive else "fixed", "dispatch": dispatch})
    return rows


def efficiency_sensitivity(
    workers: int = 64,
    dispatches: tuple[float, ...] = (COSTS.dispatch_s, AWS_DISPATCH_S, 0.0),
    overheads: tuple[float, ...] = (1.0, COSTS.engine.overhead_s, 0.25),
) -> list[dict[str, Any]]:
    """What it takes: the adaptive plan's efficiency at `workers` GPUs for other dispatch intervals and
    per-segment overheads than the measured ones (every other cost as calibrated)."""
    rows = []
    for dispatch in dispatches:
        for overhead in overheads:
            engine = replace(COSTS.engine, overhead_s=overhead)
            costs = replace(COSTS, dispatch_s=dispatch, engine=engine, head_s=min(COSTS.head_s, overhead))
            row = parallel_efficiency(workers, adaptive=True, costs=costs)
            rows.append({"dispatch_s": dispatch, "overhead_s": overhead, **row})
    return rows


def headline(workers: int = 64) -> dict[str, dict[str, Any]]:
    """The seed's job (3 minutes of 1080p, 12 minutes on one GPU) on `workers` GPUs with sized plans:
    with the local stack's measured dispatch interval and with AWS's estimated one. Its end to end is
    from the manifest's upload to the client holding the notice (the media's upload and the output's
    download depend on the user's link and are left out)."""
    engine = replace(COSTS.engine, seconds_per_frame=value("seed_s_per_frame"))
    rows = {}
    for dispatch, costs in (
        ("localstack", replace(COSTS, engine=engine)),
        ("aws-estimate", replace(COSTS, engine=engine, dispatch_s=AWS_DISPATCH_S)),
    ):
        rows[dispatch] = parallel_efficiency(workers, adaptive=True, costs=costs)
    return rows


def overhead_budget(target_s: float, workers: int = 64, steps: int = 20) -> float:
    """The largest per-segment overhead with which the seed's job still ends within `target_s` on `workers`
    GPUs (AWS's dispatch, every other cost as calibrated); 0.0 when none does. Bisection on the simulation."""

    def end_to_end(overhead: float) -> float:
        engine = replace(COSTS.engine, seconds_per_frame=value("seed_s_per_frame"), overhead_s=overhead)
        costs = replace(COSTS, engine=engine, dispatch_s=AWS_DISPATCH_S, head_s=min(COSTS.head_s, overhead))
        return float(parallel_efficiency(workers, adaptive=True, costs=costs)["end_to_end_s"])

    low, high = 0.0, 10.0
    if end_to_end(low) > target_s:
        return 0.0
    for _ in range(steps):
        middle = (low + high) / 2
        low, high = (middle, high) if end_to_end(middle) <= target_s else (low, middle)
    return round(low, 3)


def fairness(workers: int = 16) -> dict[str, Any]:
    """A 30-minute job, then 20 s later a 30 s job of the same priority: the small job's turnaround."""
    rows = {}
    for fair in (False, True):
        farm = Farm(COSTS, FleetConfig(fixed_workers=workers, fairness=fair))
        farm.run([JobSpec("big", 0.0, 1800 * FPS, FPS, "normal"), JobSpec("small", 20.0, 30 * FPS, FPS, "normal")])
        small, big = farm.results["small"], farm.results["big"]
        rows["on" if fair else "off"] = {
            "small_turnaround_s": small.done_s - small.spec.submit_s,
            "small_wait_p95_s": p95(small.waits),
            "big_turnaround_s": big.done_s,
        }
    return {"workers": workers, **rows}


def stragglers(
    workers: int, seconds: int, slow_share: float, slow_factor: float, seeds: range = range(1, 6)
) -> dict[str, Any]:
    """One job on a fleet where `slow_share` of the hosts render `slow_factor` × slower: its render time
    without and with backup copies (k = 1.5 × the median, once 90 % of its segments are done), averaged
    over `seeds` (which hosts are slow)."""
    rows: dict[str, Any] = {
        "workers": workers,
        "seconds": seconds,
        "slow_share": slow_share,
        "slow_factor": slow_factor,
    }
    for backups in (False, True):
        renders, copies, won = [], 0, 0
        for seed in seeds:
            fleet = FleetConfig(fixed_workers=workers, slow_share=slow_share, slow_factor=slow_factor, backups=backups)
            farm = Farm(COSTS, fleet, seed=seed)
            farm.run([JobSpec("job", 0.0, seconds * FPS, FPS, "normal")])
            result = farm.results["job"]
            renders.append(result.last_end_s - result.first_start_s)
            copies += farm.totals.backups
            won += farm.totals.backups_won
        rows["on" if backups else "off"] = {"render_s_mean": statistics.mean(renders), "copies": copies, "won": won}
    return rows


def straggler_table() -> list[dict[str, Any]]:
    return [
        stragglers(workers, seconds, share, factor)
        for workers, seconds, share in ((64, 180, 0.05), (16, 600, 0.1))
        for factor in (3.0, 10.0)
    ]


def variants() -> dict[str, dict[str, Any]]:
    """The day under policies side by side."""
    base: dict[str, Any] = {
        "maximum": 64, "boot_s": value("gpu_boot_s"), "adaptive": True,
        "spot_per_hour": value("spot_interruptions_per_gpu_hour"),
    }  # fmt: skip
    table = {
        "adaptive, latency 60 s, boot 180 s": base,
        "fixed 4 s segments, latency 60 s": {**base, "adaptive": False},
        "adaptive, latency 60 s, boot 60 s": {**base, "boot_s": 60.0},
        "adaptive, latency 900 s, boot 180 s": {**base, "latency_s": 900.0},
        "adaptive, latency 900 s, no Spot": {**base, "latency_s": 900.0, "spot_per_hour": 0.0},
        "adaptive, latency 60 s, lookahead": {**base, "lookahead": LOOKAHEAD},
        "adaptive, latency 900 s, lookahead": {**base, "latency_s": 900.0, "lookahead": LOOKAHEAD},
    }
    return {name: run_day(**kwargs) for name, kwargs in table.items()}
