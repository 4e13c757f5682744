"""`python -m benchmarks.stragglers`: a job's tail with and without straggler backup copies, on the local stack.

Three render workers, one of them deliberately slow (a fault rule that stalls every segment it renders
for `--slow-seconds`: about ten times a segment's normal time with the `copy` engine). The same clip
runs `--repeats` times with the watchdog's backup copies off and on, alternating. Each run reports
the end-to-end time (submit → notice), the render phase and how many segments a backup copy won.

The watchdog sweeps every 2 s here and a straggler is one past max(3 s, 2 × the median): local
segments take a second or two, where AWS's take minutes against its defaults (30 s, a sweep a
minute). Writes benchmarks/results/stragglers.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_media import bench_clip
from benchmarks.goals import Goal, exit_status, goal_table, judge, recorded
from benchmarks.pipeline import Bench, run_job
from benchmarks.provenance import write_results
from fleetctl.local.paths import LocalPaths
from fleetctl.local.processes import UpOptions
from fleetctl.local.state import LocalState
from fleetctl.local.supervisor import LocalStack
from fleetctl.stack import StackResources
from fusionfleet import layout
from fusionfleet.adapters.aws import LOCAL_ACCESS_KEY, AwsTarget
from fusionfleet.adapters.storage import get_json
from fusionfleet.environment.contract import env_of
from fusionfleet.environment.settings import AWS_DEFAULT_REGION, AWS_ENDPOINT_URL, AWS_REGION
from fusionfleet.environment.worker import WorkerEnvironment
from fusionfleet.messages import SegmentRecord

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
STATE = ROOT / ".fusionfleet" / "bench-stragglers"
SLOW_WORKER = "slow-1"


def options(port: int, backups: bool) -> UpOptions:
    return UpOptions(
        workers=2, port=port, stack="fusionfleet-stragglers", default_engine="copy", watchdog_every_s=2.0,
        backups=backups, backup_factor=2.0, backup_min_age_s=3.0,
    )  # fmt: skip


def switch_backups(stack: LocalStack, port: int, backups: bool) -> Bench:
    """The watchdog takes its settings when it starts: stop it, and `up` starts it with the new ones."""
    state = stack.load()
    for process in state.processes if state else []:
        if process.name == "watchdog" and process.alive():
            os.killpg(process.pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while process.alive() and time.monotonic() < deadline:
                time.sleep(0.2)
    state = stack.up(options(port, backups))
    return Bench(stack, StackResources.from_outputs(state.outputs), AwsTarget(state.region, state.endpoint))


def start_slow_worker(state: LocalState, resources: StackResources, seconds: float) -> subprocess.Popen[bytes]:
    faults = STATE / "slow-faults.json"
    faults.write_text(json.dumps([{"action": "slow", "at_frame": 0, "seconds": seconds}]))
    env = {
        **os.environ, AWS_ENDPOINT_URL: state.endpoint, AWS_REGION: state.region,
        AWS_DEFAULT_REGION: state.region, "AWS_ACCESS_KEY_ID": LOCAL_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": LOCAL_ACCESS_KEY,
        **env_of(WorkerEnvironment,
            queue_urls=resources.render_queue_urls, preload_engine="copy", faults_file=faults,
            scratch=STATE / "scratch-slow", name=SLOW_WORKER, work_bucket=resources.work_bucket,
        ),
    }  # fmt: skip
    log = (STATE / "logs" / f"{SLOW_WORKER}.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "gpu_worker", "--role", "render", "--name", SLOW_WORKER],
        env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


def copies(bench: Bench, job_id: str) -> dict[str, Any]:
    """Which segments the slow worker held and which a backup copy won."""
    storage, bucket = bench.storage, bench.resources.work_bucket
    plan = get_json(storage, bucket, layout.plan_key(job_id))
    records = [
        SegmentRecord.model_validate(get_json(storage, bucket, layout.segment_record_key(job_id, item["index"])))
        for item in plan
    ]
    attempts = [
        get_json(storage, bucket, key)
        for key in storage.list_keys(bucket, layout.segments_prefix(job_id))
        if "/r000-0" in key and key.endswith(".json")
    ]
    return {
        "won_by_backup": sorted(r.index for r in records if r.copy_number > 0),
        "segments_on_slow_worker": sorted({a["index"] for a in attempts if a["worker"] == SLOW_WORKER}),
        "won_by_slow_worker": sorted(r.index for r in records if r.worker == SLOW_WORKER),
    }


# Backup copies must cut the tail a slow host makes: the render phase with them at most 60 % of without
# (medians), and a copy must win the slow host's segment in every run with them.
GOALS = (
    Goal("render_on_over_off", "<=", 0.6, "render phase with backup copies / without (medians)"),
    Goal("runs_won_by_backup_share", "==", 1.0, "share of runs with copies where a copy won"),
)


def straggler_measures(runs: list[dict[str, Any]]) -> dict[str, float | None]:
    """The goals' measures from the runs (None: a side with no run). Pure."""
    off = [run["render_wall_s"] for run in runs if not run["backups"]]
    on = [run for run in runs if run["backups"]]
    ratio = statistics.median(r["render_wall_s"] for r in on) / statistics.median(off) if on and off else None
    won = sum(1 for run in on if run["won_by_backup"]) / len(on) if on else None
    return {"render_on_over_off": ratio, "runs_won_by_backup_share": won}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=4599)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slow-seconds", type=float, default=15.0)
    parser.add_argument("--seconds", type=int, default=24, help="clip length (4 s segments)")
    args = parser.parse_args()
    clip = bench_clip(f"clip-{args.seconds}s-240p.mp4", seconds=args.seconds, width=320, height=240)
    STATE.mkdir(parents=True, exist_ok=True)
    stack = LocalStack(LocalPaths.discover(STATE, env=os.environ), say=lambda _: None)
    results: dict[str, Any] = {
        "benchmark": "stragglers",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
        "setup": {
            "workers": 3, "slow_workers": 1, "slow_seconds_per_segment": args.slow_seconds, "clip_s": args.seconds,
            "engine": "copy", "watchdog_every_s": 2.0, "backup_factor": 2.0, "backup_min_age_s": 3.0,
            "backup_done_fraction": 0.75, "backup_last_segments": 1,
        },
        "runs": [],
    }  # fmt: skip
    slow: subprocess.Popen[bytes] | None = None
    try:
        bench = switch_backups(stack, args.port, False)
        state = stack.load()
        assert state is not None
        slow = start_slow_worker(state, bench.resources, args.slow_seconds)
        time.sleep(5)  # the workers load their engine before the work comes
        for repeat in range(args.repeats):
            for backups in (False, True):
                bench = switch_backups(stack, args.port, backups)
                print(f"run {repeat + 1}, backups {'on' if backups else 'off'}…", flush=True)
                run = run_job(bench, clip, "copy", "balanced")
                results["runs"].append(
                    {"repeat": repeat + 1, "backups": backups, "load_average_1m": round(os.getloadavg()[0], 2),
                     **run, **copies(bench, run["job_id"])}
                )  # fmt: skip
    finally:
        if slow is not None and slow.poll() is None:
            slow.send_signal(signal.SIGTERM)
            try:
                slow.wait(timeout=30)
            except subprocess.TimeoutExpired:
                slow.kill()
        stack.down()
        RESULTS.mkdir(parents=True, exist_ok=True)
        summary = {}
        for backups in (False, True):
            times = [run["end_to_end_s"] for run in results["runs"] if run["backups"] is backups]
            if times:
                summary["on" if backups else "off"] = {
                    "end_to_end_s_median": round(statistics.median(times), 2),
                    "end_to_end_s": times,
                }
        results["summary"] = summary
        verdicts = judge(GOALS, straggler_measures(results["runs"]))
        write_results("stragglers.json", {**results, **recorded(verdicts)}, vars(args))
    print(
        f"\n{'run':>3} {'backups':>7} {'end to end':>11} {'render':>8} {'slow held':>10} {'backup won':>11} {'load':>5}"
    )
    for run in results["runs"]:
        print(
            f"{run['repeat']:>3} {'on' if run['backups'] else 'off':>7} {run['end_to_end_s']:>10.1f}s"
            f" {run['render_wall_s']:>7.1f}s {run['segments_on_slow_worker']!s:>10}"
            f" {run['won_by_backup']!s:>11} {run['load_average_1m']:>5.1f}"
        )
    for name, figures in results["summary"].items():
        print(f"backups {name}: median {figures['end_to_end_s_median']} s end to end")
    print("\n" + goal_table(verdicts))
    return exit_status(verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
