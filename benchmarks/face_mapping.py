"""Several faces on several people, on the farm (issue 32's goal: "Two sources mapped to two people in
a group clip: each person gets the right face in every frame of every segment").

A clip of Grace Hopper and the astronaut walking past each other every 1.5 s (benchmarks.clips
`crossing_pair`, tens of seconds, several segments) is submitted to a local stack (LocalStack, two
classic workers) with two mappings: the astronaut's face onto Grace Hopper (named by a picture of
her) and Grace Hopper's onto the astronaut (named by frame 0 and her position in it). The encoded
output is decoded with OpenCV and judged by benchmarks.mapping_judge (dlib's CNN detector and
descriptor, which the classic engine does not swap with; each person's place comes from the clip):
per judged frame and person, whether the output face is nearer the mapped source than the other.

Run from the repository root: `make bench-faces` (`.venv/bin/python -m benchmarks.face_mapping`).
Writes benchmarks/results/face_mapping.json; exits non-zero when a goal is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import cv2

from benchmarks.bench_media import BENCH_MEDIA, bench_clip
from benchmarks.clips import FPS, HEIGHT, WIDTH, crossing_pair, pair_positions
from benchmarks.goals import Goal, conclude, judge, recorded
from benchmarks.judge import Judge, video_frames
from benchmarks.mapping_judge import judge_frame, source_identity, summary
from benchmarks.pipeline import Bench
from benchmarks.provenance import write_results
from fleetctl.local.paths import LocalPaths
from fleetctl.local.processes import UpOptions
from fleetctl.local.supervisor import LocalStack
from fleetctl.samples import astronaut, grace_hopper, grace_hopper_path
from fleetctl.stack import StackResources
from fusionfleet import layout
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.storage import get_json
from fusionfleet.jobs.ids import job_id as derive_job_id

ROOT = Path(__file__).resolve().parents[1]
GOALS = (
    Goal("right_share", ">=", 1.0, "judged person-frames with the face mapped to them (every one)"),
    Goal("worst_segment_share", ">=", 1.0, "the same in the worst segment"),
    Goal("frames_out_share", "==", 1.0, "output frames / target frames"),
    Goal("judged_share", ">=", 0.9, "person-frames the judge found in the target (the measure covers the clip)"),
)
MAPPING = {"grace": "astronaut", "astronaut": "grace"}
SOURCES = {"grace": grace_hopper, "astronaut": astronaut}


def drop(bench: Bench, name: str, clip: Path, quality: str) -> str:
    bucket, storage = bench.resources.media_bucket, bench.storage
    prefix = f"inputs/{name}/"
    storage.upload_file(bucket, f"{prefix}grace.jpg", grace_hopper_path())
    ok, png = cv2.imencode(".png", astronaut())
    assert ok
    storage.put_bytes(bucket, f"{prefix}astronaut.png", png.tobytes())
    storage.upload_file(bucket, f"{prefix}{clip.name}", clip)
    manifest = {
        "version": 1, "target": f"{prefix}{clip.name}", "engine": "classic", "quality": quality, "priority": "high",
        "options": {"face_selector_order": "top-bottom"},
        "faces": [
            {"source": f"{prefix}astronaut.png", "reference": f"{prefix}grace.jpg"},
            {"source": f"{prefix}grace.jpg", "reference_frame": 0, "reference_face_position": 1},
        ],
    }  # fmt: skip
    etag = storage.put_bytes(bucket, f"jobs/{name}.json", json.dumps(manifest).encode())
    return derive_job_id(bucket, f"jobs/{name}.json", etag)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=24.0, help="the clip's length")
    parser.add_argument("--judge-every", type=int, default=5, help="judge every n-th frame (and each segment's ends)")
    parser.add_argument("--quality", default="balanced")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--port", type=int, default=4618)
    args = parser.parse_args()
    count = round(args.seconds * FPS)
    clip = bench_clip(f"crossing-pair-{count}.mp4", count / FPS, WIDTH, HEIGHT, fps=FPS, frames=crossing_pair(count))
    stack = LocalStack(LocalPaths.discover(ROOT / ".fusionfleet" / "bench-faces", env=os.environ), say=print)
    options = UpOptions(workers=args.workers, port=args.port, stack="fusionfleet-faces", default_engine="classic",
                        backups=False)  # fmt: skip
    output = BENCH_MEDIA / f"crossing-pair-{count}-out.mp4"
    try:
        state = stack.up(options)
        bench = Bench(stack, StackResources.from_outputs(state.outputs), AwsTarget(state.region, state.endpoint))
        inbox = bench.subscribe()
        started = time.monotonic()
        job = drop(bench, f"faces-{time.time_ns() % 10**8}", clip, args.quality)
        notice = bench.wait_for_notice(inbox, job, timeout_s=3600)
        elapsed = time.monotonic() - started
        if notice.get("status") != "succeeded":
            raise SystemExit(f"the job did not succeed: {notice}")
        bench.storage.download_file(bench.resources.media_bucket, notice["output"]["key"], output)
        plan = get_json(bench.storage, bench.resources.work_bucket, layout.plan_key(job))
    finally:
        stack.down()
    segments = [(int(s["start_frame"]), int(s["end_frame"])) for s in plan]
    targets, outputs = list(video_frames(clip)), list(video_frames(output))
    the_judge = Judge()
    sources = {
        "grace": source_identity(the_judge, grace_hopper()),
        "astronaut": source_identity(the_judge, astronaut()),
    }
    frames = sorted({i for a, b in segments for i in (a, b - 1)} | set(range(0, count, args.judge_every)))
    rows = [
        row
        for i in frames
        for row in judge_frame(the_judge, i, targets[i], outputs[i], pair_positions(i), MAPPING, sources)
    ]
    result = summary(rows, segments)
    shares = [segment["share"] for segment in result["segments"] if segment["share"] is not None]
    measures: dict[str, float | None] = {
        "right_share": result["share"],
        "worst_segment_share": min(shares) if shares else None,
        "judged_share": result["judged"] / len(rows) if rows else None,
        "frames_out_share": len(outputs) / count,
    }
    verdicts = judge(GOALS, measures)
    report: dict[str, Any] = {
        "benchmark": "face_mapping",
        **recorded(verdicts),
        "clip": {"frames": count, "fps": FPS, "size": [WIDTH, HEIGHT], "crossing_every_s": 1.5},
        "job_id": job, "quality": args.quality, "workers": args.workers, "job_seconds": round(elapsed, 1),
        "output_frames": len(outputs), "judged_frames": len(frames),
        "result": result, "rows": [row.to_dict() for row in rows],
    }  # fmt: skip
    path = write_results("face_mapping.json", report, vars(args))
    print(f"\n{len(segments)} segments, {len(outputs)}/{count} frames out, {len(frames)} frames judged, "
          f"job {elapsed:.0f} s")  # fmt: skip
    print(f"{'segment':<14} {'judged':>7} {'right':>6} {'share':>7}")
    for segment in result["segments"]:
        share = "-" if segment["share"] is None else f"{segment['share']:.3f}"
        print(f"{segment['start']:>5}-{segment['end']:<8} {segment['judged']:>7} {segment['right']:>6} {share:>7}")
    for person, value in result["people"].items():
        print(f"{person:<14} {value['judged']:>7} {value['right']:>6} {value['share'] or 0:>7.3f}")
    return conclude(verdicts, path)


if __name__ == "__main__":
    raise SystemExit(main())
