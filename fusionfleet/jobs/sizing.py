"""Plans sized to the work and the fleet: how many segments a clip is cut into. Pure functions.

A fixed 4-second segment wastes a fleet on short clips (a 12-second clip is 3 segments: 2 workers
need two rounds, 64 workers idle) and is right for long ones. Here the count comes from a small
model of the job's makespan on the fleet it will meet:

    makespan(n) = ceil(n / workers) × (frames / n × seconds_per_frame + per_segment_overhead)

and the count is the one that minimises it, within bounds that keep every segment a whole number
of frames (the cut is frame-exact, `plan.cut_segments`), no longer than `max_seconds`, and long
enough that its fixed cost (message, download, lead-in frames, encoder start, upload, callback) is
at most `max_overhead_share` of its time. Counts within `tolerance` of the best are equally good,
and among them the one nearest `target_seconds` wins: long clips keep their 2–5 s segments, and a
short clip on a big fleet gets as many short segments as its overhead allows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from fusionfleet.jobs.plan import Segment, cut_segments, segment_count
from fusionfleet.jobs.plan import SegmentPolicy as FixedPolicy


@dataclass(frozen=True)
class WorkCost:
    """What one segment costs a worker: per frame, plus a fixed part (in seconds and lead-in frames)."""

    seconds_per_frame: float
    overhead_s: float
    lead_in_frames: int = 12  # rendered before a segment's first frame to warm temporal state

    def fixed_s(self) -> float:
        return self.overhead_s + self.lead_in_frames * self.seconds_per_frame


# Expected costs per engine. `classic` and `copy` are measured on the local stack (2-core machine,
# benchmarks/results/pipeline.json): classic 23.6 s for a 300-frame 640×360 clip; copy 44.9 s of
# worker time for 1500 frames of 1280×720; the fixed part is worker time minus engine time per
# segment (0.46 s at 360p) plus the gap between a worker's segments (0.2–0.5 s). Both built-in
# engines render 12 lead-in frames first (gpu_worker/rendering/frames.py). `facefusion` is an estimate for one
# A10G at 1080p, NOT measured here (no GPU): ~20 frames/s and about a second of S3/SQS round trips.
ENGINE_COSTS: dict[str, WorkCost] = {
    "classic": WorkCost(seconds_per_frame=0.08, overhead_s=0.7),
    "copy": WorkCost(seconds_per_frame=0.03, overhead_s=0.7),
    "facefusion": WorkCost(seconds_per_frame=0.05, overhead_s=1.0, lead_in_frames=0),
}
UNKNOWN_ENGINE_COST = WorkCost(seconds_per_frame=0.1, overhead_s=1.0)
ROUNDS_SEARCHED = 8  # past this many segments per worker the count is chosen by length alone


def engine_cost(engine: str) -> WorkCost:
    return ENGINE_COSTS.get(engine, UNKNOWN_ENGINE_COST)


@dataclass(frozen=True)
class FleetView:
    """The render workers a job will meet: those running now and the most the autoscaler may run."""

    running: int
    maximum: int

    @property
    def workers(self) -> int:
        # Plan for the fleet's maximum: a backlog scales the fleet out to it, and the overhead bound
        # keeps the cost of planning for workers that never come small.
        return max(1, self.running, self.maximum)


@dataclass(frozen=True)
class SizingPolicy:
    target_seconds: float = 4.0
    max_seconds: float = 5.0
    min_seconds: float = 0.5  # a floor whatever the overhead says
    max_overhead_share: float = 0.25
    tolerance: float = 0.03

    def __post_init__(self) -> None:
        if not 0 < self.min_seconds <= self.target_seconds <= self.max_seconds:
            raise ValueError("segment seconds must satisfy 0 < min <= target <= max")
        if not 0 < self.max_overhead_share < 1 or self.tolerance < 0:
            raise ValueError("the overhead share must be in (0, 1) and the tolerance not negative")


def shortest_segment_frames(fps: Fraction, cost: WorkCost, policy: SizingPolicy) -> int:
    """Fewest frames a segment may have: overhead ≤ share of its time, never below min_seconds.

    fixed / (fixed + frames × spf) ≤ share  ⇔  frames ≥ fixed × (1 − share) / (share × spf).
    Capped at `max_seconds`: a costly overhead never makes segments longer than the longest allowed.
    """
    share = policy.max_overhead_share
    by_overhead = cost.fixed_s() * (1 - share) / (share * cost.seconds_per_frame) if cost.seconds_per_frame else 0
    floor = float(policy.min_seconds * fps)
    ceiling = float(policy.max_seconds * fps)
    return max(1, math.ceil(min(max(by_overhead, floor), ceiling)))


def estimated_makespan_s(frame_count: int, count: int, workers: int, cost: WorkCost) -> float:
    """The model above: rounds of equal segments, each paying its fixed cost."""
    return math.ceil(count / workers) * (frame_count / count * cost.seconds_per_frame + cost.fixed_s())


def sized_segment_count(
    frame_count: int, fps: Fraction, cost: WorkCost, fleet: FleetView, policy: SizingPolicy | None = None
) -> int:
    policy = policy or SizingPolicy()
    fewest = max(1, math.ceil(frame_count / (policy.max_seconds * fps)))
    most = max(fewest, frame_count // shortest_segment_frames(fps, cost, policy))
    target = float(policy.target_seconds * fps)
    if fewest > ROUNDS_SEARCHED * fleet.workers:
        # Many rounds per worker: rounding no longer matters, so the target length decides (and the
        # search stays short for hours-long clips).
        return min(max(round(frame_count / target), fewest), most)
    most = min(most, ROUNDS_SEARCHED * fleet.workers)
    spans = {n: estimated_makespan_s(frame_count, n, fleet.workers, cost) for n in range(fewest, most + 1)}
    best = min(spans.values())
    good = [n for n, span in spans.items() if span <= best * (1 + policy.tolerance)]
    return min(good, key=lambda n: (abs(frame_count / n - target), n))


def plan_for_fleet(
    frame_count: int, fps: Fraction, cost: WorkCost, fleet: FleetView, policy: SizingPolicy | None = None,
    first: int = 0,
) -> tuple[Segment, ...]:  # fmt: skip
    """The job's segments over frames [first, first + frame_count), sized for `fleet` (frame-exact:
    consecutive whole frames, one apart at most)."""
    if frame_count <= 0:
        raise ValueError("a plan needs at least one frame")
    if fps <= 0:
        raise ValueError("fps must be positive")
    return cut_segments(frame_count, fps, sized_segment_count(frame_count, fps, cost, fleet, policy), first)


def fixed_segment_count(frame_count: int, fps: Fraction) -> int:
    """The fixed plan's count (4 s segments within 2–5 s), for comparisons."""
    return segment_count(frame_count, fps, FixedPolicy())
