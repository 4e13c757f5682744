"""What a chaos run is made of: its configuration, the jobs it submits and the faults it injects
(benchmarks.chaos runs them, benchmarks.chaos_run drives the stack)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

# Bad jobs and the reason their failure notice must give.
BAD_JOBS = {
    "not-a-video": "is neither a video in an accepted container",
    "bad-json": "the manifest is not valid JSON",
    "unknown-option": "options.face_swaper_model",
    "missing-target": "does not exist",
}


@dataclass
class Fault:
    kind: str
    at: float
    job: str | None = None  # None: it hit no work (an idle worker), so it is not timed
    detail: str = ""


@dataclass
class Job:
    name: str
    job_id: str
    target: str | None  # the input name for good jobs; None for bad ones
    engine: str = "copy"
    expect_failure: str | None = None
    submitted_at: float = 0.0
    notices: list[dict[str, Any]] = field(default_factory=list)
    first_final_at: float | None = None


@dataclass(frozen=True)
class ChaosConfig:
    jobs: int = 24
    bad_jobs: int = 4
    seconds: tuple[float, ...] = (3.0, 6.0, 9.0)
    fault_interval_s: tuple[float, float] = (2.0, 5.0)
    time_limit_s: float = 900.0
    seed: int = 7
    workers: int = 2
    engine_fault_share: float = 0.4
    # The soak's additions: long clips, and a share of jobs on the built-in classic engine.
    long_jobs: int = 0
    long_seconds: float = 180.0
    classic_share: float = 0.0
    # Good jobs (after the long ones) with a poison segment: its engine crashes on every attempt, so
    # the job must fail, naming the segment, soon after the first crash however deep the backlog.
    poison_jobs: int = 0
    size: tuple[int, int] = (320, 240)
    # After the time limit: no more faults, and this long for open jobs to end before they count as lost.
    drain_s: float = 600.0


def spread(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "min": round(ordered[0], 2) if ordered else None,
        "median": round(statistics.median(ordered), 2) if ordered else None,
        "p95": round(ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)], 2) if ordered else None,
        "max": round(ordered[-1], 2) if ordered else None,
    }
