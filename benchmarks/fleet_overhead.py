"""`make bench-fleet` / `python -m benchmarks.fleet_overhead`: the farm's own overhead, end to end.

The engine's cost is simulated as sleep: the `copy` engine with a `slow` fault of 0.2 s at every
5th output frame (about 40 ms a frame, what a GPU would spend, and no CPU). One job at a time, as a
user submits it (`Client.submit`; `Client.wait` on the job's notice, as `submit --wait` does;
`Client.download`), on fleets of 1, 6 and 12 render workers whose plans are sized to the fleet
(`local up --max-workers N`), on a one-minute and a three-minute clip.

Reports (benchmarks/results/fleet-overhead.json, a table, benchmarks/results/fleet-overhead.png):
- render and end-to-end efficiency at N workers: T(1) / (N × T(N)), render being the first
  segment's start to the last one's end and end to end the submit to the output downloaded;
- where every second outside the engine goes, from the client's own timestamps, the execution,
  the segment records, the merge's timings and the notice's arrival on a subscribed queue:
  upload; ingest, probe, plan and start (slicer); the first dispatch; dispatch per segment; each
  segment's set-up/encode and finish (download, encode, join, check, upload, commit) and the gap
  between a worker's segments (callback, delete, receive); workers idle in the render phase (the
  dispatch's stagger and the last round's imbalance); merge; notice; the client's wait; download.
  Idle time is measured, not inferred: each worker logs when it finds its queues empty and when it
  takes work again (gpu_worker.delivery.loop), and the render phase's share of those stretches is counted. What
  no stage names is reported as unaccounted (time the stages miss, or count twice).

On a 2-core machine LocalStack, the workers and the client share the cores: the figures are an upper
bound on the farm's own cost, not AWS's; the results file records the machine's load.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.fleet_accounting import STAGES, ClientTimes, Stretches, account, idle_stretches
from benchmarks.goals import Goal, exit_status, goal_table, judge, recorded
from benchmarks.pipeline import Bench
from benchmarks.provenance import write_results
from fleetctl.local.paths import LocalPaths
from fleetctl.local.processes import UpOptions
from fleetctl.local.supervisor import LocalStack
from fleetctl.notices import SqsNoticeInbox
from fleetctl.samples import grace_hopper_path, write_video
from fleetctl.stack import StackResources
from fusionfleet import layout
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.storage import get_json
from fusionfleet.environment.settings import FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG
from fusionfleet.fleet.fairness import fair_concurrency
from fusionfleet.messages import SegmentRecord

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
# Plans cut segments of at most 5 s (fusionfleet.jobs.sizing): rules for 20 s of frames cover any of them.
LONGEST_SEGMENT_FRAMES = 20 * 25
# Judged on the one-minute clip's runs.
GOALS = (
    Goal("render_6", ">=", 0.9, "render efficiency, 6 workers, 1-minute clip"),
    Goal("end_to_end_6", ">=", 0.8, "end-to-end efficiency, 6 workers, 1-minute clip"),
    Goal("render_12", ">=", 0.85, "render efficiency, 12 workers, 1-minute clip"),
)


def sleep_faults(frames: int, every: int = 5, seconds: float = 0.2) -> list[dict[str, Any]]:
    """The sleep engine's fault rules: `seconds` at every `every`-th output frame of any segment. Pure."""
    return [{"action": "slow", "seconds": seconds, "at_frame": frame} for frame in range(0, frames, every)]


def sleep_engine_s(frames: int, every: int = 5, seconds: float = 0.2) -> float:
    """The engine time the sleep faults cost a segment of `frames` output frames. Pure."""
    return -(-frames // every) * seconds


def efficiencies(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Render and end-to-end efficiency of every run against the one-worker run of its clip. Pure.

    Efficiency at N = T(1) / (N × T(N)); None where the clip has no successful one-worker run.
    """
    ones = {r["clip_s"]: r for r in runs if r["workers"] == 1 and "failed" not in r}
    rows = []
    for run in runs:
        if "failed" in run:
            rows.append({"clip_s": run["clip_s"], "workers": run["workers"], "failed": run["failed"]})
            continue
        one, n = ones.get(run["clip_s"]), run["workers"]
        rows.append(
            {
                "clip_s": run["clip_s"],
                "workers": n,
                "segments": run["segments"],
                "render_s": run["render_s"],
                "end_to_end_s": run["end_to_end_s"],
                "render": round(one["render_s"] / (n * run["render_s"]), 3) if one else None,
                "end_to_end": round(one["end_to_end_s"] / (n * run["end_to_end_s"]), 3) if one else None,
            }
        )
    return rows


def in_flight(workers: int) -> int:
    """Segments of one job the local stack's Map sends at once for this fleet (fusionfleet.fleet.fairness)."""
    return min(UpOptions().render_concurrency, fair_concurrency(workers))


def _per_segment_overhead(run: dict[str, Any]) -> float:
    """A segment's cost on its worker outside the engine, and its worker's gap before the next one."""
    return float(
        run["segment_overhead_on_worker_s"]["mean"]
        + run["stages_s"]["between_segments"] * run["workers"] / run["segments"]
    )


def calibration(runs: list[dict[str, Any]]) -> dict[str, float]:
    """The fleet simulation's inputs from these runs (benchmarks/fleetsim/scenarios.py). Pure.

    Medians: a job's start (the slicer and the first dispatch) and the waits from the last segment to
    the merge and from the merge's end to the client holding the notice, over the multi-worker runs;
    the interval between two segments' dispatches over the runs whose segments were all sent at once
    (otherwise the Map sends the next only as one ends, and the interval is the render's pace); a
    segment's cost on a worker outside the engine (life on the worker minus the engine, plus the gap
    before its worker's next segment) alone on the machine (the one-worker runs: a GPU worker has its
    host to itself) and shared with the others (the multi-worker runs, 2 cores for all); the merge as
    a line in the number of segments (least squares over all runs).
    """
    ok = [r for r in runs if "failed" not in r]
    many = [r for r in ok if r["workers"] > 1] or ok
    alone = [r for r in ok if r["workers"] == 1] or ok
    at_once = [r for r in many if r["segments"] <= in_flight(r["workers"])] or many
    stages = [r["stages_s"] for r in many]
    merges = [(float(r["segments"]), r["stages_s"]["merge"]) for r in ok]
    mean_n = statistics.fmean(n for n, _ in merges)
    mean_m = statistics.fmean(m for _, m in merges)
    spread = sum((n - mean_n) ** 2 for n, _ in merges)
    slope = max(0.0, sum((n - mean_n) * (m - mean_m) for n, m in merges) / spread if spread else 0.0)
    return {
        "job_start_s": round(statistics.median(s["slicer"] + s["first_dispatch"] for s in stages), 3),
        "dispatch_s": round(statistics.median(r["dispatch_per_segment_s"] for r in at_once), 3),
        "per_segment_overhead_alone_s": round(statistics.median(_per_segment_overhead(r) for r in alone), 3),
        "per_segment_overhead_shared_s": round(statistics.median(_per_segment_overhead(r) for r in many), 3),
        "to_merge_s": round(statistics.median(s["to_merge"] for s in stages), 3),
        "merge_base_s": round(max(0.0, mean_m - slope * mean_n), 3),
        "merge_per_segment_s": round(slope, 4),
        "notice_s": round(statistics.median(s["notice"] + s["client_wait"] for s in stages), 3),
    }


def goal_measures(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """The goals' measures: efficiencies of the one-minute clip's runs (None: not measured). Pure."""

    def at(workers: int, kind: str) -> float | None:
        found = [r.get(kind) for r in rows if r["workers"] == workers and r["clip_s"] == 60.0 and "failed" not in r]
        return found[0] if found else None

    return {"render_6": at(6, "render"), "end_to_end_6": at(6, "end_to_end"), "render_12": at(12, "render")}


def goals_met(rows: list[dict[str, Any]]) -> dict[str, bool | None]:
    """Each goal met or not (None: not measured). Pure."""
    return {verdict.goal.measure: verdict.met for verdict in judge(GOALS, goal_measures(rows))}


def table(runs: list[dict[str, Any]], rows: list[dict[str, Any]]) -> str:
    """The efficiency and the stages of every run, one column per run. Pure."""
    ok = [(run, row) for run, row in zip(runs, rows, strict=True) if "failed" not in run]
    names = [f"{r['clip_s']:g}s x{r['workers']}" for r, _ in ok]
    lines = [f"{'':<22}" + "".join(f"{name:>10}" for name in names)]

    def line(label: str, values: list[Any]) -> None:
        lines.append(f"{label:<22}" + "".join(f"{'-' if v is None else f'{v:.2f}':>10}" for v in values))

    line("segments", [r["segments"] for r, _ in ok])
    line("render s", [r["render_s"] for r, _ in ok])
    line("end to end s", [r["end_to_end_s"] for r, _ in ok])
    line("efficiency render", [row["render"] for _, row in ok])
    line("efficiency e2e", [row["end_to_end"] for _, row in ok])
    line("engine / worker s", [r["engine_per_worker_s"] for r, _ in ok])
    for stage in STAGES:
        line(f"  {stage}", [r["stages_s"][stage] for r, _ in ok])
    line("  unaccounted", [r["unaccounted_s"] for r, _ in ok])
    line("dispatch / segment s", [r["dispatch_per_segment_s"] for r, _ in ok])
    for run in runs:
        if "failed" in run:
            lines.append(f"{run['clip_s']:g}s × {run['workers']}: FAILED {run['failed']}")
    return "\n".join(lines)


def picture(runs: list[dict[str, Any]], path: Path, title: str) -> None:
    """A stacked bar per run: the engine's share and each stage outside it, in seconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in runs if "failed" not in r]
    if not ok:
        return
    labels = [f"{r['clip_s']:g} s clip\n{r['workers']} worker(s)" for r in ok]
    figure, axes = plt.subplots(figsize=(max(8, 1.6 * len(ok)), 6))
    bottom = [0.0] * len(ok)
    parts = [("engine (per worker)", [r["engine_per_worker_s"] for r in ok])]
    parts += [(stage, [max(0.0, r["stages_s"][stage]) for r in ok]) for stage in STAGES]
    colours = [plt.get_cmap("tab20")(i) for i in range(20)]
    for (name, values), colour in zip(parts, itertools.cycle(colours), strict=False):
        axes.bar(labels, values, bottom=bottom, label=name, color=colour)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    axes.set_ylabel("seconds (end to end)")
    axes.set_title(title)
    axes.legend(loc="upper right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def fleet(stack: LocalStack, workers: int, frames: int, args: argparse.Namespace) -> Bench:
    """A fresh stack with `workers` render workers whose plans are sized to them, and the sleep engine."""
    # The workers the stack starts inherit this process's environment.
    if args.lookahead is not None:
        os.environ[FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG] = str(args.lookahead)
    faults = stack.paths.state_dir / "fleet-overhead-faults.json"
    faults.parent.mkdir(parents=True, exist_ok=True)
    # Rules past a segment's last frame never fire: one file serves every clip whose segments are shorter.
    faults.write_text(json.dumps(sleep_faults(frames)))
    stack.down()
    # max_workers = workers: a fixed fleet whose plans are sized to it, as `local up --max-workers N`.
    options = UpOptions(
        workers=workers, max_workers=workers, port=args.port, stack="fusionfleet-overhead",
        default_engine="copy", faults_file=faults,
    )  # fmt: skip
    state = stack.up(options)
    time.sleep(5)  # the workers load their engine and beat before the work comes
    return Bench(stack, StackResources.from_outputs(state.outputs), AwsTarget(state.region, state.endpoint))


def run(
    bench: Bench, workers: int, clip: Path, clip_s: float, args: argparse.Namespace, since: float
) -> dict[str, Any]:
    """One job on a fleet started at `since` (its workers' log lines from before are an earlier fleet's)."""
    stack = bench.stack
    client = bench.client()
    inbox = bench.subscribe()
    arrivals: dict[str, float] = {}

    began = time.time()
    submission = client.submit([grace_hopper_path()], clip, priority="normal", engine="copy", quality="realtime")
    submitted = time.time()

    def watch() -> None:
        bench.wait_for_notice(inbox, submission.job_id, timeout_s=args.timeout)
        arrivals["notice"] = time.time()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    # The client waits as `submit --wait` does: on the job's notice, or (--wait poll) polling every second.
    notices = None
    if args.wait == "notice":
        notices = SqsNoticeInbox.open(
            bench.aws.client("sqs"), bench.aws.client("sns"), bench.resources.topic_arn, submission.job_id
        )
    try:
        status = client.wait(submission.job_id, args.timeout, notices=notices)
    finally:
        if notices is not None:
            notices.close()
    waited = time.time()
    result = status.result
    if result is None:
        raise RuntimeError(f"job {submission.job_id} ended {status.state}: {status.reason}")
    client.download(result, stack.paths.scratch / f"overhead-{workers}.mp4")
    downloaded = time.time()
    watcher.join(timeout=30)
    plan = get_json(bench.storage, bench.resources.work_bucket, layout.plan_key(submission.job_id))
    records = [
        SegmentRecord.model_validate(
            get_json(
                bench.storage, bench.resources.work_bucket, layout.segment_record_key(submission.job_id, i["index"])
            )
        )
        for i in plan
    ]
    times = ClientTimes(
        submit_began=began,
        submit_done=submitted,
        execution_started=datetime.fromisoformat(str(result.timings["started_at"])).timestamp(),
        # A notice that never came (not expected) is shown as arriving when the client saw the end.
        notice_at=arrivals.get("notice", waited),
        wait_done=waited,
        downloaded=downloaded,
    )
    return {
        "clip_s": clip_s,
        "workers": workers,
        "job_id": submission.job_id,
        "lookahead_min_backlog": os.environ.get(FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG, "default"),
        "notice_seen": "notice" in arrivals,
        "client_waits_by": args.wait,
        "load_average_1m_after": round(os.getloadavg()[0], 2),
        **account(times, records, dict(result.timings), workers, _logged_idle(stack, workers, since)),
    }


def _logged_idle(stack: LocalStack, workers: int, since: float) -> Stretches:
    """The render workers' idle stretches since `since`, from their logs (the local stack names them
    worker-1, -2, …; a log goes on across restarts, and a stretch still open when its worker stopped
    would count for ever)."""
    names = [f"worker-{number}" for number in range(1, workers + 1)]
    lines = [
        line
        for name in names
        if (log := stack.paths.logs / f"{name}.log").exists()
        for line in log.read_text(errors="replace").splitlines()
    ]
    found = idle_stretches(lines, names)
    return {name: [stretch for stretch in own if stretch[0] >= since] for name, own in found.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", default="1,6,12", help="fleet sizes, comma-separated")
    parser.add_argument("--clips", default="60,180", help="clip lengths in seconds, comma-separated")
    parser.add_argument("--size", default="320x180", help="clip frame size (small: decode and encode cost little)")
    parser.add_argument("--port", type=int, default=4611)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a job may take, else it failed")
    parser.add_argument("--lookahead", type=int, default=None, help="workers' lookahead backlog (default: theirs)")
    parser.add_argument("--wait", choices=("notice", "poll"), default="notice", help="how the client follows the job")
    parser.add_argument("--name", default="fleet-overhead", help="results: benchmarks/results/<name>.json and .png")
    args = parser.parse_args()
    width, height = (int(side) for side in args.size.split("x"))
    media = ROOT / ".fusionfleet" / "bench-media"
    media.mkdir(parents=True, exist_ok=True)
    stack = LocalStack(LocalPaths.discover(ROOT / ".fusionfleet" / "bench-overhead", env=os.environ), say=print)
    runs: list[dict[str, Any]] = []
    load_at_start = os.getloadavg()
    try:
        clips = {}
        for clip_s in (float(s) for s in args.clips.split(",")):
            clips[clip_s] = media / f"clip-{clip_s:g}s-{args.size}.mp4"
            if not clips[clip_s].exists():
                write_video(clips[clip_s], seconds=clip_s, fps=25, width=width, height=height)
        for workers in (int(n) for n in args.workers.split(",")):
            since = time.time()
            try:
                bench = fleet(stack, workers, LONGEST_SEGMENT_FRAMES, args)
            except Exception as error:  # a failed run is kept and reported, never dropped
                runs += [{"clip_s": c, "workers": workers, "failed": f"stack: {error!r}"[:500]} for c in clips]
                continue
            for clip_s, clip in clips.items():
                print(f"{workers} worker(s), {clip_s:g} s clip, sleep engine…", flush=True)
                try:
                    runs.append(run(bench, workers, clip, clip_s, args, since))
                except Exception as error:  # a failed run is kept and reported, never dropped
                    runs.append({"clip_s": clip_s, "workers": workers, "failed": repr(error)[:500]})
    finally:
        stack.down()
    rows = efficiencies(runs)
    verdicts = judge(GOALS, goal_measures(rows))
    report = {
        "benchmark": "fleet-overhead",
        "engine": "copy + slow 0.2 s every 5 output frames (sleep, about 40 ms a frame)",
        **recorded(verdicts),
        "load_average_at_start": [round(x, 2) for x in load_at_start],
        "efficiency": rows,
        "calibration": calibration(runs) if any("failed" not in r for r in runs) else None,
        "runs": runs,
    }
    path = write_results(f"{args.name}.json", report, vars(args))
    picture(runs, RESULTS / f"{args.name}.png", f"Where the seconds go ({args.name}, load {load_at_start[0]:.1f})")
    print("\n" + table(runs, rows))
    print("\n" + goal_table(verdicts) + f"\nwritten to {path}")
    # A failed run is a missed measurement: it fails the benchmark whatever the others met.
    return exit_status(verdicts) if all("failed" not in r for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
