"""What a job will cost before it is submitted: its frames, the segments the planner cuts it into, the GPU
time those take at the engine's per-frame cost, the wall time on the fleet, and the price. Pure.

The same figures the farm itself uses: the slicer's plan (`sizing.plan_for_fleet`, or one segment for a
picture), the planner's per-engine `WorkCost` (`sizing.ENGINE_COSTS`, whose comment says which are
measured and which are estimates), and GPU-seconds priced as `cost.GpuPrices` prices attempts. What it
cannot know it says: the per-frame cost is the engine's for a face swap; other processors a job names
(an enhancer, the lip syncer) add time no figure here holds, so for them the estimate is a floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from fusionfleet.jobs.cost import GpuPrices
from fusionfleet.jobs.plan import Segment, cut_segments, plan_segments
from fusionfleet.jobs.sizing import FleetView, WorkCost, engine_cost, plan_for_fleet

# Where each engine's per-frame figure comes from (sizing.ENGINE_COSTS' own notes, held equal by a test).
COST_SOURCES = {
    "classic": "measured: benchmarks/results/pipeline.json, 640×360 on a 2-core machine",
    "copy": "measured: benchmarks/results/pipeline.json, 1280×720 on a 2-core machine",
    "facefusion": "an estimate for one A10G at 1080p, about 20 frames/s; not measured, no GPU ran it here",
}
# The processors the engines' per-frame figures are for; any other a job names is not priced in.
PRICED_PROCESSORS = frozenset({"face_swapper"})
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Prices:
    """GPU-hour prices and where they were read."""

    gpu: GpuPrices
    source: str


@dataclass(frozen=True)
class Estimate:
    engine: str
    frames: int  # target frames rendered (after the trim)
    fps: Fraction
    segments: tuple[Segment, ...]
    workers: int
    cost: WorkCost
    gpu_s: float  # every segment's worker time: its frames, its lead-in frames and its fixed part
    wall_s: float  # rounds of segments on `workers`, as the planner models it
    usd_on_demand: float
    usd_spot: float | None  # None: no Spot price known (Spot hosts are then priced as On-Demand)
    unpriced: tuple[str, ...] = ()  # processors the job names that no figure here covers

    @property
    def cost_source(self) -> str:
        return COST_SOURCES.get(self.engine, "no figure for this engine: the planner's default guess")


def segment_gpu_s(segment: Segment, cost: WorkCost, first: int) -> float:
    """One segment's worker time: the lead-in frames it renders first (none before the job's first frame),
    its own frames, and its fixed part."""
    lead_in = min(cost.lead_in_frames, segment.start_frame - first)
    return (segment.frame_count + lead_in) * cost.seconds_per_frame + cost.overhead_s


def estimate(
    engine: str, frames: int, fps: Fraction, workers: int, prices: GpuPrices, first: int = 0,
    processors: tuple[str, ...] = (),
    sized: bool = True,
) -> Estimate:  # fmt: skip
    """The job's plan and cost on a fleet of `workers` (a picture is one segment of one frame); `sized`
    False: the fixed plan a slicer with no fleet to size for cuts (a local stack without an autoscaler)."""
    if frames < 1:
        raise ValueError("a job renders at least one frame")
    cost = engine_cost(engine)
    fleet = FleetView(running=0, maximum=max(1, workers))
    if frames == 1:
        plan = cut_segments(1, fps, 1, first)
    elif sized:
        plan = plan_for_fleet(frames, fps, cost, fleet, first=first)
    else:
        plan = plan_segments(frames, fps, first=first)
    each = [segment_gpu_s(segment, cost, first) for segment in plan]
    gpu_s = sum(each)
    # The planner's model (sizing.estimated_makespan_s): rounds of segments, each round its longest.
    wall_s = math.ceil(len(plan) / fleet.workers) * max(each)
    spot = None if prices.spot is None else gpu_s / SECONDS_PER_HOUR * prices.spot
    unpriced = tuple(name for name in processors if name not in PRICED_PROCESSORS)
    return Estimate(engine, frames, fps, plan, fleet.workers, cost, gpu_s, wall_s,
                    gpu_s / SECONDS_PER_HOUR * prices.on_demand, spot, unpriced)  # fmt: skip
