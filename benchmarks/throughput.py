"""`make bench-throughput` / `python -m benchmarks.throughput`: the orchestration's own throughput.

Many workers on the local stack render with a sleep engine (the `copy` engine plus a `slow` fault
of S seconds per segment, so the engine costs wall time and no CPU) on tiny frames, so what is left
is the farm's own machinery: Step Functions dispatching, SQS, S3 reads and writes, callbacks. Several
jobs are submitted at once and the segment records are read afterwards.

Reports (benchmarks/results/throughput.json and a table):
- segments per second over the render phase, and the fleet's busy share (engine seconds over
  workers × render-phase seconds);
- per-segment overhead: a segment's life on a worker minus its engine time (download, decode,
  encode, join, check, upload, records), and the gap on a worker between one segment's end and
  its next segment's start while work was waiting (callback, delete, receive, attempt record);
- the finish (a segment's last frame → its record committed: join, check, upload, commit) and the
  engine's free time on a worker between one segment's last frame and the next one's render start,
  while that one waited: what a GPU would sit idle for;
- dispatch: how fast Step Functions put segments in the queue (the spread of send times).

`--lookahead 0,2` runs each fleet size with workers that take their next task while one renders
(FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG, gpu_worker/delivery/lookahead.py) off and on, side by side.

These measured costs calibrate the fleet simulation (`benchmarks/fleetsim/scenarios.py`). On a
2-core machine LocalStack and the workers share the cores, so the figures are an upper bound on the
farm's own cost, not AWS's.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.bench_media import bench_clip
from benchmarks.goals import Goal, conclude, judge, recorded
from benchmarks.pipeline import Bench
from benchmarks.provenance import write_results
from fleetctl.local.paths import LocalPaths
from fleetctl.local.processes import UpOptions
from fleetctl.local.supervisor import LocalStack
from fleetctl.samples import grace_hopper_path
from fleetctl.stack import StackResources
from fusionfleet import layout
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.storage import get_json
from fusionfleet.environment.settings import FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG
from fusionfleet.messages import SegmentRecord

ROOT = Path(__file__).resolve().parents[1]
# It measures the machinery, against no target of speed (a 2-core machine cannot hold 16 workers'
# pace): its goal is that the machinery finishes every job it is given.
GOALS = (Goal("runs_completed_share", "==", 1.0, "share of runs whose every job succeeded in time"),)
RESULTS = ROOT / "benchmarks" / "results"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _spread(values: list[float]) -> dict[str, Any]:
    return {
        "count": len(values),
        "p50": round(percentile(values, 0.5), 3) if values else None,
        "p95": round(percentile(values, 0.95), 3) if values else None,
    }


def summarise(records: list[SegmentRecord], workers: int) -> dict[str, Any]:
    """The throughput figures from the segment records of one run. Pure."""
    sent = [r.started_at - r.queued_s for r in records]
    first_start = min(r.started_at for r in records)
    last_end = max(r.finished_at for r in records)
    span = last_end - first_start
    engine = [r.engine_s for r in records]
    overhead = [r.total_s - r.engine_s for r in records]
    by_worker: dict[str, list[SegmentRecord]] = defaultdict(list)
    for record in records:
        by_worker[record.worker].append(record)
    gaps, engine_free = [], []
    for own in by_worker.values():
        own.sort(key=lambda r: r.started_at)
        for before, after in itertools.pairwise(own):
            # Only gaps while this next segment was already waiting: idle time is not overhead.
            if after.started_at - after.queued_s <= before.finished_at:
                gaps.append(max(0.0, after.started_at - before.finished_at))
            if before.rendered_at and after.started_at - after.queued_s <= before.rendered_at:
                # From one segment's last frame to the next one's render start: what a GPU waits.
                engine_free.append(max(0.0, after.started_at - before.rendered_at))
    finish = [r.finished_at - r.rendered_at for r in records if r.rendered_at]
    return {
        "segments": len(records),
        "workers_seen": len(by_worker),
        "render_phase_s": round(span, 3),
        "segments_per_s": round(len(records) / span, 3),
        "busy_share": round(sum(engine) / (workers * span), 3),
        "engine_s_mean": round(statistics.fmean(engine), 3),
        "overhead_on_worker_s": {
            "mean": round(statistics.fmean(overhead), 3),
            "p50": round(percentile(overhead, 0.5), 3),
            "p95": round(percentile(overhead, 0.95), 3),
        },
        "gap_between_segments_s": {
            "count": len(gaps),
            "mean": round(statistics.fmean(gaps), 3) if gaps else None,
            "p95": round(percentile(gaps, 0.95), 3) if gaps else None,
        },
        "finish_s": _spread(finish),
        "engine_free_between_segments_s": _spread(engine_free),
        "dispatch": {
            "send_span_s": round(max(sent) - min(sent), 3),
            "mean_interval_s": round((max(sent) - min(sent)) / max(1, len(sent) - 1), 4),
        },
        "queued_s_p95": round(percentile([r.queued_s for r in records], 0.95), 3),
    }


def run(
    stack: LocalStack,
    workers: int,
    jobs: int,
    clip: Path,
    sleep_s: float,
    port: int,
    timeout_s: float,
    lookahead: int = 0,
) -> dict[str, Any]:
    # The workers the stack starts inherit this process's environment.
    os.environ[FUSIONFLEET_LOOKAHEAD_MIN_BACKLOG] = str(lookahead)
    faults = stack.paths.state_dir / "throughput-faults.json"
    faults.parent.mkdir(parents=True, exist_ok=True)
    # The sleep engine: every attempt of every segment sleeps once, at its first frame.
    faults.write_text(json.dumps([{"action": "slow", "seconds": sleep_s, "at_frame": 0}]))
    stack.down()
    state = stack.up(
        UpOptions(workers=workers, port=port, stack="fusionfleet-throughput", default_engine="copy", faults_file=faults)
    )
    time.sleep(5)  # the workers load their engine before the work comes
    bench = Bench(stack, StackResources.from_outputs(state.outputs), AwsTarget(state.region, state.endpoint))
    client = bench.client()
    inbox = bench.subscribe()
    began = time.monotonic()
    ids = [
        client.submit([grace_hopper_path()], clip, priority="normal", engine="copy", quality="realtime").job_id
        for _ in range(jobs)
    ]
    deadline = began + timeout_s
    for job_id in ids:
        try:
            bench.wait_for_notice(inbox, job_id, timeout_s=max(1.0, deadline - time.monotonic()))
        except TimeoutError:
            states = {other: client.status(other).state for other in ids}
            stuck = {other: state for other, state in states.items() if state != "SUCCEEDED"}
            raise RuntimeError(f"not done within {timeout_s:.0f} s: {stuck}") from None
    wall = time.monotonic() - began
    records = []
    for job_id in ids:
        status = client.status(job_id)
        if status.state != "SUCCEEDED":
            raise RuntimeError(f"throughput job {job_id} ended {status.state}: {status.reason}")
        plan = get_json(bench.storage, bench.resources.work_bucket, layout.plan_key(job_id))
        for item in plan:
            key = layout.segment_record_key(job_id, item["index"])
            records.append(SegmentRecord.model_validate(get_json(bench.storage, bench.resources.work_bucket, key)))
    return {
        "workers": workers,
        "lookahead_min_backlog": lookahead,
        "jobs": jobs,
        "sleep_engine_s": sleep_s,
        "submit_to_last_notice_s": round(wall, 3),
        "load_average_1m_after": round(os.getloadavg()[0], 2),
        **summarise(records, workers),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", default="16,32", help="fleet sizes to run, comma-separated")
    parser.add_argument("--jobs", type=int, default=8, help="jobs submitted at once")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each job's clip (4 s segments)")
    parser.add_argument("--sleep", type=float, default=2.0, help="the sleep engine's seconds per segment")
    parser.add_argument("--port", type=int, default=4601)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a run may take, else it failed")
    parser.add_argument("--lookahead", default="0", help="workers' lookahead backlogs to run (0: off), comma-separated")
    parser.add_argument("--name", default="throughput", help="results file: benchmarks/results/<name>.json")
    args = parser.parse_args()
    # Tiny frames: decoding and encoding should cost next to nothing beside the machinery.
    clip = bench_clip(f"clip-{args.seconds:g}s-128x72.mp4", seconds=args.seconds, width=128, height=72)
    stack = LocalStack(LocalPaths.discover(ROOT / ".fusionfleet" / "bench-throughput", env=os.environ), say=print)
    results: dict[str, Any] = {
        "benchmark": "throughput",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
        "runs": [],
    }
    try:
        runs = itertools.product((int(n) for n in args.workers.split(",")), (int(n) for n in args.lookahead.split(",")))
        for workers, lookahead in runs:
            print(
                f"{workers} workers (lookahead {lookahead or 'off'}), {args.jobs} jobs of {args.seconds:g} s,"
                f" sleep engine {args.sleep:g} s…"
            )
            try:
                row = run(stack, workers, args.jobs, clip, args.sleep, args.port, args.timeout, lookahead)
            except Exception as error:  # a failed run is kept and reported, never dropped
                row = {"workers": workers, "lookahead_min_backlog": lookahead, "failed": repr(error)[:500]}
            results["runs"].append(row)
    finally:
        stack.down()
        done = [row for row in results["runs"] if "failed" not in row]
        share = len(done) / len(results["runs"]) if results["runs"] else None
        verdicts = judge(GOALS, {"runs_completed_share": share})
        RESULTS.mkdir(parents=True, exist_ok=True)
        write_results(f"{args.name}.json", {**results, **recorded(verdicts)}, vars(args))
    header = f"{'workers':>7} {'ahead':>5} {'segments':>8} {'seg/s':>6} {'busy':>5} {'overhead p50/p95':>17}"
    print(f"\n{header} {'gap mean':>9} {'finish p50':>10} {'engine free p50':>15} {'send every':>10}")
    for row in results["runs"]:
        ahead = row.get("lookahead_min_backlog") or "off"
        if "failed" in row:
            print(f"{row['workers']:>7} {ahead:>5} FAILED: {row['failed']}")
            continue
        overhead, gap = row["overhead_on_worker_s"], row["gap_between_segments_s"]
        print(
            f"{row['workers']:>7} {ahead:>5} {row['segments']:>8}"
            f" {row['segments_per_s']:>6.2f} {row['busy_share']:>5.2f}"
            f" {overhead['p50']:>7.2f}/{overhead['p95']:<7.2f}s {gap['mean'] or 0:>8.2f}s"
            f" {row['finish_s']['p50'] or 0:>9.2f}s {row['engine_free_between_segments_s']['p50'] or 0:>14.2f}s"
            f" {row['dispatch']['mean_interval_s']:>9.3f}s"
        )
    return conclude(verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
