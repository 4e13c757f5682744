"""`make bench-sim` / `python -m benchmarks.fleetsim`: the fleet simulation behind issue 10's goals.

Writes benchmarks/results/fleetsim.json and fleetsim.png (parallel efficiency against fleet size)
and prints a table. Simulated time, so the machine's load does not change the figures.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.fleetsim.scenarios import (
    ACCEPTABLE_LATENCY_S,
    COSTS,
    LOOKAHEAD,
    LOW_BULK_JOBS,
    Estimate,
    Measured,
    described,
    efficiency_curve,
    efficiency_sensitivity,
    fairness,
    headline,
    straggler_table,
    variants,
)
from benchmarks.goals import Goal, exit_status, goal_table, judge, recorded
from benchmarks.provenance import write_results

RESULTS = Path(__file__).resolve().parents[1] / "results"
GOALS = (
    Goal("efficiency_64", ">=", 0.9, "render efficiency at 64 GPUs, best plan and dispatch"),
    Goal("gpu_busy_share", ">=", 0.9, "GPU busy share on a mixed day, best variant"),
    Goal("high_wait_p95_s", "<", 60.0, "high-priority segment wait p95, worst day (s)"),
    Goal("seed_job_64_end_to_end_s", "<=", 60.0, "the seed's job on 64 GPUs, AWS dispatch, end to end (s)"),
)


def plot(curve: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    for plan in ("fixed", "adaptive"):
        for dispatch in ("localstack", "aws-estimate"):
            rows = [r for r in curve if r["plan"] == plan and r["dispatch"] == dispatch]
            axes.plot([r["workers"] for r in rows], [r["efficiency_render"] for r in rows], marker="o",
                      label=f"{plan} plan, {dispatch} dispatch")  # fmt: skip
    axes.axhline(GOALS[0].target, color="grey", linestyle="--", linewidth=0.8)
    axes.set_xscale("log", base=2)
    axes.set_xlabel("GPUs")
    axes.set_ylabel("parallel efficiency (render)")
    axes.set_title("3-minute 1080p job, simulated")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> int:
    began = time.monotonic()
    curve = efficiency_curve()
    sensitivity = efficiency_sensitivity()
    days = variants()
    fair = fairness()
    tails = straggler_table()
    at_64 = {f"{r['plan']}/{r['dispatch']}": round(r["efficiency_render"], 3) for r in curve if r["workers"] == 64}
    best_day = max(days.values(), key=lambda d: d["gpu_busy_share"])
    seed = headline(64)
    verdicts = judge(GOALS, {
        "efficiency_64": max(at_64.values()), "gpu_busy_share": best_day["gpu_busy_share"],
        "high_wait_p95_s": max(d["high_segment_wait_p95_s"] for d in days.values()),
        "seed_job_64_end_to_end_s": seed["aws-estimate"]["end_to_end_s"],
    })  # fmt: skip
    results = {
        "benchmark": "fleetsim",
        **recorded(verdicts),
        "calibration": {
            "measured": described(Measured),
            "estimated": described(Estimate),
            "costs": asdict(COSTS),
            "day": {
                "acceptable_latency_s": ACCEPTABLE_LATENCY_S,
                "low_bulk_jobs": LOW_BULK_JOBS,
                "lookahead_min_backlog": LOOKAHEAD,
            },
        },
        "seed_job_on_64": seed,
        "efficiency_curve": curve,
        "efficiency_at_64": at_64,
        "efficiency_at_64_sensitivity": sensitivity,
        "days": days,
        "fairness": fair,
        "stragglers": tails,
        "wall_s": round(time.monotonic() - began, 1),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_results("fleetsim.json", results)
    plot(curve, RESULTS / "fleetsim.png")
    print("parallel efficiency, 3-minute 1080p job at 64 GPUs (goal >= 0.9):")
    for name, value in at_64.items():
        print(f"  {name:<28} {value:.3f}")
    print("\nthe seed's job (3 minutes of 1080p, 12 minutes on one GPU) on 64 GPUs, sized plan:")
    for dispatch, row in seed.items():
        print(
            f"  {dispatch:<13} dispatch: render {row['render_s']:.1f} s, end to end {row['end_to_end_s']:.1f} s"
            f" (one GPU {row['one_gpu_end_to_end_s']:.0f} s), efficiency {row['efficiency_render']:.3f} render,"
            f" {row['efficiency_end_to_end']:.3f} end to end, {row['segments']} segments"
        )
    print("\nthe same, adaptive plan, other costs (rows: dispatch interval; columns: per-segment overhead):")
    overheads = sorted({r["overhead_s"] for r in sensitivity}, reverse=True)
    print("  " + " " * 10 + "".join(f"{o:>8.2f}s" for o in overheads))
    for dispatch in sorted({r["dispatch_s"] for r in sensitivity}, reverse=True):
        cells = {r["overhead_s"]: r["efficiency_render"] for r in sensitivity if r["dispatch_s"] == dispatch}
        print(f"  {dispatch:>8.3f}s" + "".join(f"{cells[o]:>9.3f}" for o in overheads))
    print(f"\n{'mixed day, 64 GPUs max':<40} {'busy':>6} {'worker':>7} {'billed h':>9} {'hi p95':>7} {'low max':>8}")
    for name, day in days.items():
        print(
            f"{name:<40} {day['gpu_busy_share']:>6.3f} {day['worker_busy_share']:>7.3f} {day['gpu_billed_h']:>9.1f}"
            f" {day['high_segment_wait_p95_s']:>6.1f}s {day['low_wait_max_h']:>7.2f}h"
        )
    print(
        f"\nfairness, {fair['workers']} GPUs, a 30 s job 20 s after a 30-minute one (same priority): small job done in "
        f"{fair['off']['small_turnaround_s']:.0f} s without, {fair['on']['small_turnaround_s']:.0f} s with; "
        f"big job {fair['off']['big_turnaround_s']:.0f} s / {fair['on']['big_turnaround_s']:.0f} s"
    )
    print("\nstragglers (one job, slow hosts; render time, mean of 5 fleets): without / with backup copies")
    for row in tails:
        print(
            f"  {row['workers']} GPUs, {row['seconds']} s clip, {row['slow_share']:.0%} hosts"
            f" {row['slow_factor']:g}x slow:"
            f" {row['off']['render_s_mean']:.1f} s / {row['on']['render_s_mean']:.1f} s"
            f" ({row['on']['won']} of {row['on']['copies']} copies won)"
        )
    print("\n" + goal_table(verdicts) + "\n(benchmarks/results/fleetsim.json, fleetsim.png)")
    return exit_status(verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
