"""`make bench-try` / `python -m benchmarks.trial`: a test render of 3 frames of a 30-minute clip.

Issue 32's goal: "a test render of 3 frames of a 30-minute clip answers in under 30 s on an idle warm
local worker (the clip is not decoded end to end for it)"; issue 44 item 5's: under 10 s, each frame rendered
from only the frames it depends on. On a local stack of its own (LocalStack, the slicer, one render worker),
a generated 30-minute 320×180 25 fps H.264 clip (GOP of 250 frames, AAC; its generation is not timed), and
`fusionfleet try` run in this process exactly as the command line runs it, with frames 0, the middle one and
the last one, for each engine of `--engines` in turn on the same worker (each warmed first): by default the
copy engine, which carries no state (its plan warms each frame from the frame itself: the lead-in and the
frame), then the classic engine, which carries state (from its full-plan segment's start, as before).
`--engines facefusion` runs FaceFusion's own code with the harness's stand-in models (fleetctl/harness; CPU)
with its tracker on (its window of 2 frames before and after each frame), the harness's face as the source:

- the time from the command's start (the clip's upload included) to the three pictures downloaded,
  on the benchmark's own clock; the worker is warm (a test render of a short clip ran first) and idle;
- the proof the clip was not decoded end to end: the frames each frame's worker attempt fed its engine
  (its segment record's `frames_rendered`: the lead-in and the frames from where its plan item warms it,
  `Segment.warm_from`, up to the frame) against the clip's frames, checked against that plan item; the
  decoder also decodes the frames between the keyframe before the lead-in and the lead-in (at most one
  GOP, 250 frames, an attempt), which no record counts. Also recorded, with no goal: the bytes of the
  target each attempt read (`bytes_read`, the worker's range reader), of which the container's index
  (the `moov` box, 1.4 MB for 30 minutes) is read by every attempt. The first run judged bytes against
  `< 5 %` of the clip and missed it (16.5 %, benchmarks/results/trial-run1.json): three indexes alone
  are 7.8 % of this clip, so that bar measured the index, not the decode;
- each picture decoded with OpenCV (not the engine's code): a PNG of the clip's size.

Writes benchmarks/results/trial.json, prints a table and its goals, exits non-zero when one is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import av
import cv2

from benchmarks.goals import Goal, conclude, judge, recorded
from benchmarks.provenance import write_results
from fleetctl.cli import main as cli_main
from fleetctl.local.paths import LocalPaths
from fleetctl.local.processes import UpOptions
from fleetctl.local.supervisor import LocalStack
from fleetctl.samples import grace_hopper_path, write_video
from fleetctl.stack import StackResources
from fleetctl.try_commands import picture_name
from fusionfleet import layout
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.storage import S3Storage, get_json
from fusionfleet.jobs.decisions import tracker_window
from fusionfleet.jobs.plan import Segment
from fusionfleet.media.runner import ffmpeg_exe
from fusionfleet.messages import JobContext, SegmentRecord

ROOT = Path(__file__).resolve().parents[1]
LEAD_IN_FRAMES = 12  # gpu_worker.rendering.frames.LEAD_IN_FRAMES: decoded before a segment's first frame


def goals(engine: str) -> tuple[Goal, ...]:
    """Each engine's goals, its measures named `<measure>[<engine>]`."""
    return (
        Goal(f"answer_s_max[{engine}]", "<", 10.0, f"{engine}: 3 frames of 30 min, command → pictures, worst (s)"),
        Goal(f"frames_fed_share_max[{engine}]", "<", 0.01, f"{engine}: frames its engine took / clip's, worst run"),
        Goal(f"frames_fed_as_planned[{engine}]", "==", 1.0, f"{engine}: every attempt fed what its plan item says"),
        Goal(f"pictures_ok_share[{engine}]", "==", 1.0, f"{engine}: pictures that decode as PNGs of the clip's size"),
    )


GOALS = tuple(goal for engine in ("copy", "classic", "facefusion") for goal in goals(engine))


def make_clip(media: Path, minutes: float, width: int, height: int) -> Path:
    """The astronaut shot looped to `minutes`, re-encoded whole with x264's usual GOP (250) and AAC."""
    clip = media / f"clip-{minutes:g}min-{width}x{height}.mp4"
    if clip.exists():
        return clip
    base = write_video(media / f"base-20s-{width}x{height}.mp4", seconds=20, fps=25, width=width, height=height)
    loops = int(minutes * 60 // 20) - 1
    partial = clip.with_suffix(".part.mp4")
    subprocess.run(
        [ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-y", "-stream_loop", str(loops),
         "-i", str(base), "-c:v", "libx264", "-preset", "veryfast", "-crf", "23", "-g", "250",
         "-c:a", "aac", "-b:a", "96k", "-movflags", "+faststart", str(partial)],
        check=True, timeout=1800,
    )  # fmt: skip
    partial.rename(clip)
    return clip


def frame_count(clip: Path) -> int:
    """From the container's index, read by PyAV (not the farm's probe): the judge's own count."""
    with av.open(str(clip)) as container:
        return int(container.streams.video[0].frames)


DEFAULT_ENGINES = "copy,classic"
# Each engine's options and source: FaceFusion with its tracker on, so its frames need their window.
ENGINE_OPTIONS: dict[str, dict[str, Any]] = {"facefusion": {"face_tracker_score": 0.3}}
SOURCES: dict[str, Path] = {}  # where not Grace Hopper's picture: the harness's face for FaceFusion's stand-ins


def use_harness(folder: Path) -> None:
    """FaceFusion's own code with the harness's stand-in models for the stack's workers (they get this process's
    environment), and the harness's face as its source."""
    from fleetctl.harness.facefusion import prepare, skip_reason
    from fleetctl.harness.pictures import face_image
    from fusionfleet.environment.settings import FUSIONFLEET_FACEFUSION_HOME, FUSIONFLEET_FACEFUSION_PYTHON

    reason = skip_reason()
    if reason is not None:
        raise SystemExit(f"--engines facefusion needs the FaceFusion harness: {reason}")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    harness = prepare(folder)
    os.environ.update(
        {**harness.env, FUSIONFLEET_FACEFUSION_HOME: str(harness.home), FUSIONFLEET_FACEFUSION_PYTHON: harness.python}
    )
    SOURCES["facefusion"] = folder / "face.png"
    cv2.imwrite(str(SOURCES["facefusion"]), face_image())


def run_try(
    endpoint: str, region: str, stack: str, clip: Path, frames: list[int], out: Path, engine: str
) -> tuple[int, str]:
    """`fusionfleet try …` in this process; returns its exit status and the job id it printed."""
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in ENGINE_OPTIONS.get(engine, {}).items()]
    argv = ["try", "--source", str(SOURCES.get(engine, grace_hopper_path())), "--target", str(clip),
            "--frames", ",".join(map(str, frames)), "--engine", engine, "--output-dir", str(out),
            "--endpoint-url", endpoint, "--region", region, "--stack", stack, "--timeout", "600", *flags]  # fmt: skip
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = cli_main(argv)
    lines = printed.getvalue().split()
    return code, lines[-1] if lines else ""


def attempt_facts(storage: S3Storage, work_bucket: str, job: str, engine: str) -> dict[str, Any]:
    """What the job's worker attempts read and decoded: from its records and its plan (and the frames after each
    that FaceFusion's tracker looks ahead to, fed too up to the last frame the farm counts: 45047 here, its
    probe's count over the duration, where PyAV's index says 45000)."""
    total = JobContext.model_validate(get_json(storage, work_bucket, layout.job_key(job))).video.frame_count
    plan = [Segment.from_dict(item) for item in get_json(storage, work_bucket, layout.plan_key(job))]
    records = [
        SegmentRecord.model_validate(get_json(storage, work_bucket, layout.segment_record_key(job, s.index)))
        for s in plan
    ]
    ahead = tracker_window(ENGINE_OPTIONS.get(engine, {})) if engine == "facefusion" else 0
    planned = [s.end_frame - max(0, s.engine_start - LEAD_IN_FRAMES) + min(ahead, total - s.end_frame) for s in plan]
    facts: dict[str, Any] = {}
    if engine == "facefusion":
        # The job's content analysis over the whole target, before any frame: from its progress record's start
        # to its verdict's writing (S3's clock, to the second).
        started = float(get_json(storage, work_bucket, layout.content_analysis_progress_key(job))["started_at"])
        written = storage.head(work_bucket, layout.content_analysis_key(job)).last_modified.timestamp()
        verdict = get_json(storage, work_bucket, layout.content_analysis_key(job))
        facts = {"analysis_s": round(written - started, 1), "analysis_sampled": verdict["sampled"]}
    return {
        **facts,
        "bytes_read": [record.bytes_read for record in records],
        "frames_fed": [record.frames_rendered for record in records],
        "frames_planned": planned,
        "warm_from": [s.engine_start for s in plan],
        "engine_s": [record.engine_s for record in records],
        "worker_total_s": [record.total_s for record in records],
    }


def check_pictures(out: Path, frames: list[int], size: tuple[int, int]) -> int:
    good = 0
    for frame in frames:
        picture = cv2.imread(str(out / picture_name(frame)), cv2.IMREAD_UNCHANGED)
        if picture is not None and (picture.shape[1], picture.shape[0]) == size:
            good += 1
    return good


def engine_measures(engine: str, rows: list[dict[str, Any]], frames: int) -> dict[str, float | None]:
    """One engine's runs against its goals; a failed run never answered, so its answer goal is missed."""
    done = [row for row in rows if row["exit"] == 0]
    answer = max(row["answer_s"] for row in rows) if rows else None
    return {
        f"answer_s_max[{engine}]": float("inf") if len(done) < len(rows) else answer,
        f"frames_fed_share_max[{engine}]": max(row["frames_fed_share"] for row in done) if done else None,
        f"frames_fed_as_planned[{engine}]": float(all(row["frames_fed"] == row["frames_planned"] for row in done))
        if done
        else None,
        f"pictures_ok_share[{engine}]": sum(row.get("pictures_ok", 0) for row in rows) / (frames * len(rows))
        if rows
        else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--height", type=int, default=180)
    parser.add_argument("--runs", type=int, default=3, help="timed test renders, one after another")
    parser.add_argument("--port", type=int, default=4631)
    parser.add_argument("--engines", default=DEFAULT_ENGINES, help="comma-separated, each run in turn on the worker")
    args = parser.parse_args()
    engines = [name for name in args.engines.split(",") if name]
    if "facefusion" in engines:
        use_harness(ROOT / ".fusionfleet" / "bench-trial-harness")
    media = ROOT / ".fusionfleet" / "bench-media"
    media.mkdir(parents=True, exist_ok=True)
    clip = make_clip(media, args.minutes, args.width, args.height)
    warm_clip = media / f"base-20s-{args.width}x{args.height}.mp4"
    total = frame_count(clip)
    size = clip.stat().st_size
    frames = [0, total // 2, total - 1]
    print(f"clip {clip.name}: {total} frames, {size} bytes; frames {frames}", flush=True)
    stack_name = "fusionfleet-trial"
    stack = LocalStack(LocalPaths.discover(ROOT / ".fusionfleet" / "bench-trial", env=os.environ), say=print)
    options = UpOptions(workers=1, port=args.port, stack=stack_name, default_engine="classic", backups=False)
    rows: list[dict[str, Any]] = []
    load_at_start = os.getloadavg()
    try:
        state = stack.up(options)
        storage = S3Storage(AwsTarget(state.region, state.endpoint).client("s3"))
        work_bucket = StackResources.from_outputs(state.outputs).work_bucket
        out = ROOT / ".fusionfleet" / "bench-trial-out"
        for engine in engines:
            warm_code, warm_job = run_try(
                state.endpoint, state.region, stack_name, warm_clip, [5], out / f"warm-{engine}", engine
            )
            print(f"{engine}: warm-up test render {warm_job}: exit {warm_code}", flush=True)
            time.sleep(5)  # the worker idle again, its engine loaded
            for number in range(args.runs):
                folder = out / f"{engine}-run-{number}"
                load = os.getloadavg()[0]
                started = time.monotonic()
                code, job = run_try(state.endpoint, state.region, stack_name, clip, frames, folder, engine)
                answered = time.monotonic() - started
                row: dict[str, Any] = {"engine": engine, "run": number, "job_id": job, "exit": code,
                                       "answer_s": round(answered, 3), "load_average_1m": round(load, 2)}  # fmt: skip
                if code == 0:
                    facts = attempt_facts(storage, work_bucket, job, engine)
                    row.update(facts)
                    row["bytes_read_share"] = round(sum(facts["bytes_read"]) / size, 5)
                    row["frames_fed_share"] = round(sum(facts["frames_fed"]) / total, 6)
                    row["pictures_ok"] = check_pictures(folder, frames, (args.width, args.height))
                rows.append(row)
                print(f"{engine} run {number}: exit {code}, {answered:.2f} s", flush=True)
                time.sleep(3)
    finally:
        stack.down()
    measures: dict[str, float | None] = {}
    for engine in engines:
        measures.update(engine_measures(engine, [row for row in rows if row["engine"] == engine], len(frames)))
    verdicts = judge([goal for goal in GOALS if goal.measure.split("[")[1].rstrip("]") in engines], measures)
    report = {
        "benchmark": "trial",
        **recorded(verdicts),
        "engines": engines,
        "clip": {"name": clip.name, "frames": total, "bytes": size, "size": [args.width, args.height], "gop": 250},
        "frames": frames,
        "load_average_at_start": [round(x, 2) for x in load_at_start],
        "bytes_read_share_max": max((row["bytes_read_share"] for row in rows if row["exit"] == 0), default=None),
        "runs": rows,
    }
    # Another set of engines keeps its own file, so the default run's stays what docs/benchmarks.md cites.
    name = "trial.json" if args.engines == DEFAULT_ENGINES else f"trial-{'-'.join(engines)}.json"
    path = write_results(name, report, vars(args))
    print(f"\n{'engine':<8} {'run':>3} {'exit':>4} {'answer':>8} {'read share':>10} {'engine fed':>16} "
          f"{'per frame':>14} {'pictures':>8} {'load':>5}")  # fmt: skip
    for row in rows:
        decoded = f"{sum(row.get('frames_fed', []))}/{total}" if row.get("frames_fed") else "-"
        each = ",".join(map(str, row.get("frames_fed", []))) or "-"
        share = f"{row['bytes_read_share']:.4f}" if "bytes_read_share" in row else "-"
        print(f"{row['engine']:<8} {row['run']:>3} {row['exit']:>4} {row['answer_s']:>7.2f}s {share:>10} "
              f"{decoded:>16} {each:>14} {row.get('pictures_ok', 0):>8} {row['load_average_1m']:>5.1f}")  # fmt: skip
    return conclude(verdicts, path)


if __name__ == "__main__":
    raise SystemExit(main())
