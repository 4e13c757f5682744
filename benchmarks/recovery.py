"""`make bench-recovery` / `python -m benchmarks.recovery`: how fast a lost worker's segment runs again.

On the local stack (2 render workers, the render queues' visibility at 15 s, the `copy` engine slowed
to about 20 s a segment so there is time to act mid-render), each trial drops a one-segment job, waits
until a worker renders it, then either kills that worker (SIGKILL: its host is lost) or stops it
(SIGTERM: a scale-in or a Spot interruption), and times:

- kill → the segment running again: until an attempt record of the segment starts after the signal
  (the message comes back when its visibility lapses; the other worker takes it);
- SIGTERM → drained: until the stopped worker's process has exited (it checkpoints, releases the
  message and leaves), and SIGTERM → the segment running again elsewhere.

Every job must still succeed. The stopped or killed worker is started again before the next trial.
The figures are wall time on this machine (its load is recorded), measured from the benchmark's clock
and the workers' records, which share it. Writes benchmarks/results/recovery.json, prints a table and
its goals, and exits non-zero when one is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_media import bench_clip
from benchmarks.chaos_model import spread
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
from fusionfleet.errors import ObjectMissing
from fusionfleet.jobs.ids import job_id as derive_job_id
from fusionfleet.messages import SegmentAttempt, WorkerBeat

ROOT = Path(__file__).resolve().parents[1]
VISIBILITY_S = 15
GOALS = (
    Goal("kill_to_running_again_p95_s", "<=", 2.0 * VISIBILITY_S, "SIGKILL → the segment running again, p95 (s)"),
    Goal("sigterm_to_drained_p95_s", "<=", 10.0, "SIGTERM → the worker drained and gone, p95 (s)"),
    Goal("sigterm_to_running_again_p95_s", "<=", 15.0, "SIGTERM → the segment running again, p95 (s)"),
    Goal("jobs_succeeded_share", "==", 1.0, "jobs that still succeeded, share"),
)


def slow_rules(frames: int, seconds: float) -> list[dict[str, Any]]:
    """The copy engine slowed to `seconds` a segment of `frames` frames: a pause every 5 frames. Pure."""
    pause = seconds / max(1, -(-frames // 5))
    return [{"job": "recovery", "action": "slow", "at_frame": frame, "seconds": pause} for frame in range(0, frames, 5)]


def attempts_after(bench: Bench, job: str, since: float) -> list[SegmentAttempt]:
    """The segment's attempts that started after `since` (epoch seconds), oldest first."""
    found = []
    storage, bucket = bench.storage, bench.resources.work_bucket
    for key in storage.list_keys(bucket, layout.segments_prefix(job)):
        if layout.parse_attempt_record_key(key) is None:
            continue
        try:
            attempt = SegmentAttempt.model_validate(get_json(storage, bucket, key))
        except (ObjectMissing, ValueError):
            continue
        if attempt.started_at > since:
            found.append(attempt)
    return sorted(found, key=lambda attempt: attempt.started_at)


def holder(bench: Bench, job: str, timeout_s: float) -> str:
    """The worker whose presence record says it renders the job's segment."""
    storage, bucket = bench.storage, bench.resources.work_bucket
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for key in storage.list_keys(bucket, layout.WORKERS_PREFIX):
            try:
                beat = WorkerBeat.model_validate_json(storage.get_bytes(bucket, key))
            except (ObjectMissing, ValueError):
                continue
            if beat.current == f"{job}:0":
                return beat.name
        time.sleep(0.2)
    raise TimeoutError(f"no worker took {job} within {timeout_s:.0f} s")


def drop(bench: Bench, name: str, clip: Path) -> str:
    bucket, storage = bench.resources.media_bucket, bench.storage
    storage.upload_file(bucket, f"inputs/{name}/face.jpg", grace_hopper_path())
    storage.upload_file(bucket, f"inputs/{name}/{clip.name}", clip)
    manifest = {"version": 1, "source": [f"inputs/{name}/face.jpg"], "target": f"inputs/{name}/{clip.name}",
                "engine": "copy", "priority": "high"}  # fmt: skip
    etag = storage.put_bytes(bucket, f"jobs/{name}.json", json.dumps(manifest).encode())
    return derive_job_id(bucket, f"jobs/{name}.json", etag)


def trial(stack: LocalStack, bench: Bench, options: UpOptions, clip: Path, kind: str, number: int) -> dict[str, Any]:
    """One job, one signal to the worker rendering it, and the times that follow."""
    inbox = bench.subscribe()
    job = drop(bench, f"recovery-{kind}-{number}-{time.time_ns() % 10**6}", clip)
    name = holder(bench, job, 120)
    time.sleep(3)  # mid-render: a few chunks saved
    state = stack.load()
    assert state is not None
    (process,) = [p for p in state.processes if p.name == name]
    signalled = time.time()
    os.killpg(process.pid, signal.SIGKILL if kind == "kill" else signal.SIGTERM)
    row: dict[str, Any] = {"kind": kind, "job_id": job, "worker": name, "load_average_1m": round(os.getloadavg()[0], 2)}
    if kind == "stop":
        while process.alive() and time.time() - signalled < 120:
            time.sleep(0.05)
        row["drained_s"] = round(time.time() - signalled, 3)
    again: list[SegmentAttempt] = []
    while not again and time.time() - signalled < 180:
        time.sleep(0.2)
        again = attempts_after(bench, job, signalled)
    row["running_again_s"] = round(again[0].started_at - signalled, 3) if again else None
    row["taken_by"] = again[0].worker if again else None
    stack.up(options)  # the lost worker's replacement, before the next trial
    notice = bench.wait_for_notice(inbox, job, timeout_s=300)
    row["succeeded"] = notice.get("status") == "succeeded"
    return row


def measures(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """The goals' measures from the trials (a missing time counts as missed: it never ran again). Pure."""

    def p95(kind: str, field: str) -> float | None:
        values = [row.get(field) for row in rows if row["kind"] == kind]
        if not values:
            return None
        return float("inf") if None in values else spread([float(v) for v in values if v is not None])["p95"]

    return {
        "kill_to_running_again_p95_s": p95("kill", "running_again_s"),
        "sigterm_to_drained_p95_s": p95("stop", "drained_s"),
        "sigterm_to_running_again_p95_s": p95("stop", "running_again_s"),
        "jobs_succeeded_share": sum(1 for row in rows if row.get("succeeded")) / len(rows) if rows else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=4, help="kills and as many stops, alternating")
    parser.add_argument("--segment-seconds", type=float, default=20.0, help="the slowed engine's time a segment")
    parser.add_argument("--port", type=int, default=4612)
    args = parser.parse_args()
    clip = bench_clip("clip-4s-320x180.mp4", seconds=4, width=320, height=180)
    stack = LocalStack(LocalPaths.discover(ROOT / ".fusionfleet" / "bench-recovery", env=os.environ), say=print)
    faults = stack.paths.state_dir / "recovery-faults.json"
    faults.parent.mkdir(parents=True, exist_ok=True)
    faults.write_text(json.dumps(slow_rules(100, args.segment_seconds)))
    options = UpOptions(workers=2, port=args.port, stack="fusionfleet-recovery", default_engine="copy",
                        visibility_s=VISIBILITY_S, faults_file=faults, backups=False)  # fmt: skip
    rows: list[dict[str, Any]] = []
    load_at_start = os.getloadavg()
    try:
        state = stack.up(options)
        time.sleep(5)  # the workers load their engine before the work comes
        bench = Bench(stack, StackResources.from_outputs(state.outputs), AwsTarget(state.region, state.endpoint))
        for number in range(args.trials):
            for kind in ("kill", "stop"):
                print(f"trial {number + 1}: {kind}…", flush=True)
                try:
                    rows.append(trial(stack, bench, options, clip, kind, number))
                except Exception as error:  # a failed trial is kept and reported, never dropped
                    rows.append({"kind": kind, "failed": repr(error)[:500], "running_again_s": None})
    finally:
        stack.down()
    verdicts = judge(GOALS, measures(rows))
    report = {
        "benchmark": "recovery",
        **recorded(verdicts),
        "load_average_at_start": [round(x, 2) for x in load_at_start],
        "visibility_s": VISIBILITY_S,
        "trials": rows,
    }
    path = write_results("recovery.json", report, vars(args))
    print(f"\n{'kind':<6} {'worker':<10} {'drained':>8} {'again':>8} {'taken by':<10} {'ok':<4} {'load':>5}")
    for row in rows:
        drained = f"{row['drained_s']:.1f}s" if row.get("drained_s") is not None else "-"
        again = f"{row['running_again_s']:.1f}s" if row.get("running_again_s") is not None else "-"
        print(f"{row['kind']:<6} {row.get('worker', '-'):<10} {drained:>8} {again:>8} {row.get('taken_by') or '-':<10}"
              f" {'yes' if row.get('succeeded') else 'NO':<4} {row.get('load_average_1m', 0):>5.1f}")  # fmt: skip
    return conclude(verdicts, path)


if __name__ == "__main__":
    raise SystemExit(main())
