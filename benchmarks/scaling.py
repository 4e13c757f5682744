"""`make bench-scale` / `python -m benchmarks.scaling`: the local fleet's scale, measured end to end.

1. Speed-up: a 12-second 640×360 clip on the `classic` engine, 1 worker vs 2 workers, with fixed
   plans (3 segments of 4 s) and with plans sized to the fleet (`local up --max-workers`).
2. Autoscaling: `local up --workers 1 --max-workers 4`, a burst (a one-minute `copy` job), how
   long until 4 workers run, and how long after the job until the fleet is back at 1.

Writes benchmarks/results/scaling.json and prints a table. Wall-clock figures: the machine's load
average is recorded beside them (other work on a shared machine slows the 2-worker run most).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_media import bench_clip
from benchmarks.goals import Goal, conclude, judge, recorded
from benchmarks.pipeline import Bench, run_job
from benchmarks.provenance import write_results
from fleetctl.local.paths import LocalPaths
from fleetctl.local.processes import UpOptions
from fleetctl.local.supervisor import LocalStack
from fleetctl.samples import grace_hopper_path
from fleetctl.stack import StackResources
from fusionfleet.adapters.aws import AwsTarget

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
GOALS = (
    Goal("speedup_sized_plan", ">=", 1.7, "speed-up, 2 workers vs 1, plans sized to the fleet"),
    Goal("reached_max_workers_s", "<=", 60.0, "a burst: 1 → 4 workers (autoscaler), seconds"),
)


def up(stack: LocalStack, workers: int, max_workers: int | None, port: int, engine: str) -> Bench:
    # Fresh processes for every configuration: a running slicer keeps the fleet maximum it started with.
    stack.down()
    state = stack.up(
        UpOptions(workers=workers, max_workers=max_workers, port=port, stack="fusionfleet-scale", default_engine=engine)
    )
    time.sleep(5)  # let the workers load their engine before the work comes
    return Bench(stack, StackResources.from_outputs(state.outputs), AwsTarget(state.region, state.endpoint))


def speedup(stack: LocalStack, clip: Path, port: int) -> dict[str, Any]:
    runs: dict[str, Any] = {}
    for name, workers, max_workers in (("1", 1, 1), ("2 fixed plan", 2, None), ("2 sized plan", 2, 2)):
        print(f"classic, {name} worker(s)…")
        bench = up(stack, workers, max_workers, port, "classic")
        load = os.getloadavg()[0]
        runs[name] = {**run_job(bench, clip, "classic", "balanced"), "load_average_1m_before": round(load, 2)}
        runs[name]["load_average_1m_after"] = round(os.getloadavg()[0], 2)
    one = runs["1"]["end_to_end_s"]
    return {
        "runs": runs,
        "speedup_fixed_plan": one / runs["2 fixed plan"]["end_to_end_s"],
        "speedup_sized_plan": one / runs["2 sized plan"]["end_to_end_s"],
    }


def burst(stack: LocalStack, clip: Path, port: int) -> dict[str, Any]:
    print("autoscaling 1..4, a burst…")
    bench = up(stack, 1, 4, port, "copy")
    status_file = stack.paths.autoscaler_status
    client = bench.client()
    inbox = bench.subscribe()
    began = time.monotonic()
    submission = client.submit([grace_hopper_path()], clip, priority="normal", engine="copy")
    samples: list[tuple[float, int, int]] = []
    reached_max_s: float | None = None
    done_s: float | None = None
    back_to_min_s: float | None = None
    sqs = bench.aws.client("sqs")
    while time.monotonic() - began < 600:
        try:
            record = json.loads(status_file.read_text())
        except (OSError, ValueError):
            record = None
        now = time.monotonic() - began
        if record:
            samples.append((round(now, 1), record["current"], record["desired"]))
            if reached_max_s is None and record["current"] == 4:
                reached_max_s = now
            if done_s is not None and record["current"] == 1:
                back_to_min_s = now - done_s
                break
        if done_s is None:
            for message in sqs.receive_message(QueueUrl=inbox, WaitTimeSeconds=1).get("Messages", []):
                if submission.job_id in message["Body"]:
                    done_s = time.monotonic() - began
        else:
            time.sleep(1)
    return {
        "job_id": submission.job_id,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "reached_max_workers_s": reached_max_s,
        "job_done_s": done_s,
        "back_to_min_after_done_s": back_to_min_s,
        "samples_t_current_desired": samples,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=4598)
    parser.add_argument("--skip-burst", action="store_true")
    args = parser.parse_args()
    clip = bench_clip("clip-12s-360p.mp4", seconds=12, width=640, height=360)
    long_clip = bench_clip("clip-60s-360p.mp4", seconds=60, width=640, height=360)
    stack = LocalStack(LocalPaths.discover(ROOT / ".fusionfleet" / "bench-scale", env=os.environ), say=lambda _: None)
    results: dict[str, Any] = {
        "benchmark": "scaling",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
    }
    try:
        results["speedup"] = speedup(stack, clip, args.port)
        if not args.skip_burst:
            results["autoscaling"] = burst(stack, long_clip, args.port)
    finally:
        stack.down()
        verdicts = judge(GOALS, {
            "speedup_sized_plan": results.get("speedup", {}).get("speedup_sized_plan"),
            "reached_max_workers_s": results.get("autoscaling", {}).get("reached_max_workers_s"),
        })  # fmt: skip
        RESULTS.mkdir(parents=True, exist_ok=True)
        write_results("scaling.json", {**results, **recorded(verdicts)}, vars(args))
    runs = results["speedup"]["runs"]
    print(f"\n{'run':<16} {'segments':>8} {'end to end':>11} {'render':>8} {'load 1m':>8}")
    for name, run in runs.items():
        print(
            f"{name:<16} {run['segments']:>8} {run['end_to_end_s']:>10.1f}s {run['render_wall_s']:>7.1f}s"
            f" {run['load_average_1m_before']:>8.2f}"
        )
    gains = results["speedup"]
    print(f"speed-up, fixed plan {gains['speedup_fixed_plan']:.2f}x; sized plan {gains['speedup_sized_plan']:.2f}x")
    if "autoscaling" in results:
        scale = results["autoscaling"]
        print(f"autoscaling 1..4: at 4 workers after {scale['reached_max_workers_s']} s; "
              f"back at 1 worker {scale['back_to_min_after_done_s']} s after the job")  # fmt: skip
    return conclude(verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
