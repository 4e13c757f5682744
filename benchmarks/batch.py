"""`make bench-batch` / `python -m benchmarks.batch`: one face onto 50 targets as one batch, on the local stack.

40 pictures and 10 short clips (benchmarks/batch_media.py) as one batch on 6 render workers, the engine
as sleep (the `copy` engine with a `slow` fault of S seconds at every segment's first frame: wall time,
no CPU), and one worker killed (SIGKILL) mid-batch and replaced, as a lost host is. Then every target
again, each submitted alone (no sleep: the fault names only the batch), all 50.

Checks (GOALS): every item succeeded although a worker died under one; each batch output is identical
to the same target's output submitted alone (OpenCV decodes both, their pixels hashed frame by frame)
and has the target's frames and size; the batch's wall time (manifest dropped → its summary notice on a
queue subscribed to the topic) within 1.3× of (total engine time / 6), the engine time summed from the
workers' own segment records; exactly one notice for the batch (its summary) and none for an item.

Writes benchmarks/results/<name>.json (batch-50.json) with provenance, prints a table and the goals, exits non-zero
when one is missed. Wall-clock figures: the machine's load average is recorded beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.batch_media import compare, decode, write_inputs
from benchmarks.goals import Goal, conclude, judge, recorded
from benchmarks.pipeline import Bench
from benchmarks.provenance import write_results
from benchmarks.recovery import attempts_after
from fleetctl.local.paths import LocalPaths
from fleetctl.local.processes import UpOptions
from fleetctl.local.supervisor import LocalStack
from fleetctl.samples import grace_hopper_path
from fleetctl.stack import StackResources
from fusionfleet import layout
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.storage import get_json
from fusionfleet.errors import ObjectMissing
from fusionfleet.jobs.ids import batch_id, item_id, job_id
from fusionfleet.messages import SegmentRecord, WorkerBeat

ROOT = Path(__file__).resolve().parents[1]
RATIO = 1.3
GOALS = (
    Goal("items_succeeded", "==", 50, "items succeeded (a worker killed mid-batch)"),
    Goal("outputs_identical", "==", 50, "outputs identical to the target submitted alone"),
    Goal("wall_over_ideal", "<=", RATIO, "batch wall time / (total engine time / workers)"),
    Goal("batch_notices", "==", 1, "notices for the batch and its items (the summary)"),
)


def _upload(bench: Bench, inputs: list[Path], prefix: str) -> tuple[str, dict[str, Path]]:
    storage, bucket = bench.storage, bench.resources.media_bucket
    face = f"{prefix}face.jpg"
    storage.upload_file(bucket, face, grace_hopper_path())
    targets = {}
    for path in inputs:
        storage.upload_file(bucket, f"{prefix}targets/{path.name}", path)
        targets[f"{prefix}targets/{path.name}"] = path
    return face, targets


def _drop(bench: Bench, name: str, manifest: dict[str, Any]) -> str:
    body = json.dumps({"version": 1, "engine": "copy", "priority": "normal", **manifest}).encode()
    return bench.storage.put_bytes(bench.resources.media_bucket, f"jobs/{name}.json", body)


def _rendering(bench: Bench, batch: str) -> tuple[str, str] | None:
    """A worker rendering one of the batch's segments now: (worker, `<item>:<segment>`)."""
    storage, bucket = bench.storage, bench.resources.work_bucket
    for key in storage.list_keys(bucket, layout.WORKERS_PREFIX):
        try:
            beat = WorkerBeat.model_validate_json(storage.get_bytes(bucket, key))
        except (ObjectMissing, ValueError):
            continue
        if beat.current and beat.current.startswith(f"{batch}.") and not beat.current.endswith(":merge"):
            return beat.name, beat.current
    return None


def _kill_one(stack: LocalStack, bench: Bench, options: UpOptions, batch: str, deadline: float) -> dict[str, Any]:
    """SIGKILL a worker mid-segment of the batch, start its replacement, and see the segment run again."""
    found = None
    while found is None and time.monotonic() < deadline:
        found = _rendering(bench, batch)
        time.sleep(0.3)
    if found is None:
        return {"killed": False, "why": "no worker was seen rendering an item"}
    name, current = found
    time.sleep(3)  # mid-segment: the engine is asleep in it
    state = stack.load()
    assert state is not None
    (process,) = [p for p in state.processes if p.name == name]
    signalled = time.time()
    os.killpg(process.pid, signal.SIGKILL)
    print(f"killed {name} (SIGKILL) while it rendered {current}", flush=True)
    stack.up(options)  # its replacement, as the fleet replaces a lost host
    job, segment = current.rsplit(":", 1)
    return {"killed": True, "worker": name, "segment": current, "job_id": job, "index": int(segment),
            "signalled_at": signalled, "replaced_after_s": round(time.time() - signalled, 3)}  # fmt: skip


def _notices(bench: Bench, inbox: str, batch: str, until: float, stop_at_summary: bool) -> list[dict[str, Any]]:
    """The notices for the batch and its items that reach `inbox` before `until` (epoch seconds), each
    with the time it was read; stops at the summary when asked."""
    sqs = bench.aws.client("sqs")
    found: list[dict[str, Any]] = []
    while time.time() < until:
        wait = max(1, min(20, int(until - time.time())))
        for message in sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10, WaitTimeSeconds=wait).get(
            "Messages", []
        ):
            sqs.delete_message(QueueUrl=inbox, ReceiptHandle=message["ReceiptHandle"])
            notice = json.loads(json.loads(message["Body"])["Message"])
            if str(notice.get("job_id", "")).startswith(batch):
                found.append({**notice, "_read_at": time.time()})
        if stop_at_summary and any(n.get("stage") == "batch" for n in found):
            break
    return found


def _engine_records(bench: Bench, batch: str, items: int) -> list[SegmentRecord]:
    storage, bucket = bench.storage, bench.resources.work_bucket
    records = []
    for index in range(items):
        job = item_id(batch, index)
        for entry in get_json(storage, bucket, layout.plan_key(job)):
            key = layout.segment_record_key(job, entry["index"])
            records.append(SegmentRecord.model_validate(get_json(storage, bucket, key)))
    return records


def run_batch(
    stack: LocalStack, bench: Bench, options: UpOptions, inputs: list[Path], name: str, kill: bool, timeout_s: float
) -> dict[str, Any]:
    face, targets = _upload(bench, inputs, f"inputs/{name}/")
    inbox = bench.subscribe()
    load = os.getloadavg()[0]
    dropped = time.time()
    etag = _drop(bench, name, {"source": [face], "targets": [f"inputs/{name}/targets/"]})
    batch = batch_id(bench.resources.media_bucket, f"jobs/{name}.json", etag)
    print(f"batch {batch}: {len(targets)} targets dropped", flush=True)
    deadline = time.monotonic() + timeout_s
    killed: dict[str, Any] = {"killed": False, "why": "not asked"}
    if kill:
        time.sleep(30)  # into the batch: its first rounds done, most of it to come
        killed = _kill_one(stack, bench, options, batch, deadline)
    notices = _notices(bench, inbox, batch, dropped + timeout_s, stop_at_summary=True)
    summaries = [n for n in notices if n.get("stage") == "batch"]
    if not summaries:
        raise RuntimeError(f"no summary for batch {batch} within {timeout_s:.0f} s")
    wall = summaries[0]["_read_at"] - dropped
    notices += _notices(bench, inbox, batch, time.time() + 20, stop_at_summary=False)  # any late or extra one
    records = _engine_records(bench, batch, len(targets))
    engine = sum(record.engine_s for record in records)
    workers = options.workers
    if killed.get("killed"):
        again = attempts_after(bench, killed["job_id"], killed["signalled_at"])
        killed["running_again_s"] = round(again[0].started_at - killed["signalled_at"], 3) if again else None
        killed["taken_by"] = again[0].worker if again else None
    results = summaries[0].get("results", [])
    return {
        "batch_id": batch,
        "targets": {key: path.name for key, path in targets.items()},
        "load_average_1m_before": round(load, 2),
        "load_average_1m_after": round(os.getloadavg()[0], 2),
        "wall_s": round(wall, 3),
        "engine_total_s": round(engine, 3),
        "ideal_s": round(engine / workers, 3),
        "wall_over_ideal": round(wall / (engine / workers), 4) if engine else None,
        "segments": len(records),
        "attempts_max": max((record.attempt for record in records), default=0),
        "workers_seen": len({record.worker for record in records}),
        "first_segment_start_after_drop_s": round(min(r.started_at for r in records) - dropped, 3),
        "last_segment_end_to_summary_s": round(summaries[0]["_read_at"] - max(r.finished_at for r in records), 3),
        "kill": killed,
        "summary": {key: value for key, value in summaries[0].items() if key != "results"},
        "results": results,
        "notices": [{"job_id": n.get("job_id"), "stage": n.get("stage"), "status": n.get("status")} for n in notices],
    }


def run_alone(bench: Bench, targets: dict[str, Path], face: str, name: str, timeout_s: float) -> dict[str, str]:
    """Each target submitted alone, all at once: its output's key by target key."""
    inbox = bench.subscribe()
    ids = {}
    for number, key in enumerate(sorted(targets)):
        job_name = f"{name}-{number:02d}"
        etag = _drop(bench, job_name, {"source": [face], "target": key})
        ids[key] = job_id(bench.resources.media_bucket, f"jobs/{job_name}.json", etag)
    deadline = time.monotonic() + timeout_s
    outputs = {}
    for key, job in ids.items():
        notice = bench.wait_for_notice(inbox, job, timeout_s=max(1.0, deadline - time.monotonic()))
        if notice.get("status") != "succeeded":
            raise RuntimeError(f"{key} submitted alone ended {notice.get('status')}: {notice.get('reason')}")
        outputs[key] = str(notice["output"]["key"])
    return outputs


def judge_outputs(bench: Bench, batch: dict[str, Any], alone: dict[str, str], targets: dict[str, Path]) -> list[Any]:
    """Each item's output against its target's submitted alone, decoded by OpenCV."""
    bucket = bench.resources.media_bucket
    prefix = f"s3://{bucket}/"
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as scratch:
        folder = Path(scratch)
        for result in batch["results"]:
            target = result["target"]
            row = {"index": result["index"], "target": targets[target].name, "state": result["state"]}
            if result["state"] != "SUCCEEDED" or not str(result.get("output", "")).startswith(prefix):
                rows.append({**row, "identical": False, "why": f"item ended {result['state']}"})
                continue
            suffix = targets[target].suffix
            mine, theirs = folder / f"batch-{result['index']}{suffix}", folder / f"alone-{result['index']}{suffix}"
            bench.storage.download_file(bucket, str(result["output"])[len(prefix) :], mine)
            bench.storage.download_file(bucket, alone[target], theirs)
            got, want = decode(mine), decode(theirs)
            why = compare(got, want, decode(targets[target]))
            rows.append({**row, "identical": not why, "why": why, "frames": got.frames, "hash": got.hashes[0][:16]})
    return rows


def measures(batch: dict[str, Any] | None, judged: list[dict[str, Any]] | None) -> dict[str, float | None]:
    """The goals' measures from a run (None: not measured, as when the batch never ended). Pure."""
    if batch is None:
        return {}
    succeeded = sum(1 for result in batch["results"] if result["state"] == "SUCCEEDED")
    return {
        # No item lost counts only when a worker really died under the batch.
        "items_succeeded": succeeded if batch["kill"].get("killed") else None,
        "outputs_identical": sum(1 for row in judged if row["identical"]) if judged is not None else None,
        "wall_over_ideal": batch["wall_over_ideal"],
        "batch_notices": len(batch["notices"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--sleep", type=float, default=20.0, help="the sleep engine's seconds per segment")
    parser.add_argument("--visibility", type=int, default=20, help="the render queues' visibility (s)")
    parser.add_argument("--no-kill", dest="kill", action="store_false", help="kill no worker mid-batch")
    parser.add_argument("--port", type=int, default=4623)
    parser.add_argument("--timeout", type=float, default=1500.0, help="seconds the batch may take, else it failed")
    parser.add_argument("--name", default="batch-50", help="results file: benchmarks/results/<name>.json")
    args = parser.parse_args()
    inputs = write_inputs(ROOT / ".fusionfleet" / "bench-media" / "batch")
    stack = LocalStack(LocalPaths.discover(ROOT / ".fusionfleet" / "bench-batch", env=os.environ), say=print)
    stamp = time.strftime("%H%M%S", time.gmtime())
    faults = stack.paths.state_dir / "batch-faults.json"
    faults.parent.mkdir(parents=True, exist_ok=True)
    # The sleep engine for the batch's items only (a rule names a substring of the job id).
    faults.write_text(json.dumps([{"job": f"sleepy-{stamp}", "action": "slow", "seconds": args.sleep, "at_frame": 0}]))
    options = UpOptions(workers=args.workers, port=args.port, stack="fusionfleet-batch", default_engine="copy",
                        visibility_s=args.visibility, faults_file=faults)  # fmt: skip
    report: dict[str, Any] = {"benchmark": "batch", "inputs": [path.name for path in inputs]}
    batch: dict[str, Any] | None = None
    judged: list[dict[str, Any]] | None = None
    try:
        state = stack.up(options)
        time.sleep(5)  # the workers load their engine before the work comes
        bench = Bench(stack, StackResources.from_outputs(state.outputs), AwsTarget(state.region, state.endpoint))
        try:
            batch = run_batch(stack, bench, options, inputs, f"sleepy-{stamp}", args.kill, args.timeout)
            report["batch"] = batch
            print("each target alone…", flush=True)
            targets = {key: ROOT / ".fusionfleet" / "bench-media" / "batch" / name
                       for key, name in batch["targets"].items()}  # fmt: skip
            face = f"inputs/sleepy-{stamp}/face.jpg"
            alone = run_alone(bench, targets, face, f"alone-{stamp}", args.timeout)
            judged = judge_outputs(bench, batch, alone, targets)
            report["outputs"] = judged
        except Exception as error:  # a failed run is kept and reported, never dropped
            report["failed"] = repr(error)[:1000]
    finally:
        stack.down()
    verdicts = judge(GOALS, measures(batch, judged))
    path = write_results(f"{args.name}.json", {**report, **recorded(verdicts)}, vars(args))
    print_table(batch, judged, report.get("failed"))
    return conclude(verdicts, path)


def print_table(batch: dict[str, Any] | None, judged: list[dict[str, Any]] | None, failed: str | None) -> None:
    if failed:
        print(f"FAILED: {failed}")
    if batch is None:
        return
    kill = batch["kill"]
    states: dict[str, int] = {}
    for result in batch["results"]:
        states[result["state"]] = states.get(result["state"], 0) + 1
    print(f"\n{'items':>5} {'segments':>8} {'engine total':>12} {'ideal (/6)':>10} {'wall':>7} {'ratio':>6}"
          f" {'load 1m':>7}  states")  # fmt: skip
    print(f"{len(batch['results']):>5} {batch['segments']:>8} {batch['engine_total_s']:>11.1f}s"
          f" {batch['ideal_s']:>9.1f}s {batch['wall_s']:>6.1f}s {batch['wall_over_ideal']:>6.3f}"
          f" {batch['load_average_1m_after']:>7.2f}  {states}")  # fmt: skip
    if kill.get("killed"):
        print(f"killed {kill['worker']} under {kill['segment']}: ran again after {kill.get('running_again_s')} s"
              f" on {kill.get('taken_by')}")  # fmt: skip
    print(f"notices for the batch: {[(n['stage'], n['status']) for n in batch['notices']]}")
    if judged is not None:
        same = sum(1 for row in judged if row["identical"])
        print(f"outputs identical to the target alone: {same} of {len(judged)}")
        for row in judged:
            if not row["identical"]:
                print(f"  item {row['index']} {row['target']}: {row['why']}")


if __name__ == "__main__":
    raise SystemExit(main())
