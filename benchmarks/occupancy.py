"""`make bench-occupancy` / `python -m benchmarks.occupancy`: does the engine wait? One worker, per frame size.

One local render worker (the whole local stack: S3, Step Functions, the queues, the worker loop and its
engine process) renders a clip per frame size with the sleep engine: the `copy` engine with a `slow`
fault of 0.2 s at every 5th output frame, about 40 ms a frame and no CPU (what a GPU would spend). The
worker takes its next segment while one renders (lookahead backlog 1: with one worker nobody else could
take it), as a GPU worker of a busy fleet does.

Where a segment's time goes comes from the stages the worker timed where each ran (its segment records,
`stages`: gpu_worker/rendering/stage_clock.py), not from a remainder: read, decode, transfer, the engine's own
time, the engine's waits for input and for room behind it, encode, upload, the first frame, the tail.
The judge of the render phase is independent of the worker: the clip's frame count times the sleep
engine's 40 ms is the floor, and the render phase is the first segment's start to the last one's end
on the records' clocks; the output is downloaded and its frame count and duration checked with PyAV.
The worker's memory (its process tree: the worker, its engine process and their ffmpegs) is sampled
from /proc while each clip renders.

Goals (issue 36): at 1080p the engine's own time ≥ 0.95 of the segments' time and the render phase
≤ 1.1 × the engine floor; at 2160p ≥ 0.9; 640×360 and 320×180 no slower than `--baseline` (a results
file of this benchmark run against main's code). Exits non-zero when a goal is missed. The 2-core
machine is shared: the results record its load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import threading
import time
from fractions import Fraction
from itertools import islice
from pathlib import Path
from typing import Any

import av

from benchmarks.fleet_overhead import fleet, run, sleep_engine_s
from benchmarks.provenance import write_results
from fleetctl.local.paths import LocalPaths
from fleetctl.local.supervisor import LocalStack
from fleetctl.samples import write_video
from fusionfleet import layout
from fusionfleet.adapters.storage import get_json
from fusionfleet.jobs.encoding import encoder_settings
from fusionfleet.media.ffmpeg import encode_segment_argv
from fusionfleet.media.inspect import summarize
from fusionfleet.media.runner import ffmpeg_exe
from fusionfleet.messages import SegmentRecord

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
FPS = 25
ENGINE_S_PER_FRAME = 0.04
# Each size and the seconds of clip it renders (2160p shorter: its decode and encode share two cores).
SIZES = {"320x180": 20.0, "640x360": 20.0, "1920x1080": 20.0, "3840x2160": 10.0}
GOALS = {
    "occupancy_1080p": 0.95,
    "render_over_floor_1080p": 1.1,
    "occupancy_2160p": 0.9,
    "no_slower_than_baseline": 1.0,
}
SHOWN = ("read", "decode", "transfer", "engine", "engine_waits_input", "engine_waits_output", "encode", "upload",
         "first_frame", "tail")  # fmt: skip


ENCODER_ALONE_FRAMES = 50  # one chunk of the job's grid at 25 fps


def encoder_alone(clip: Path, frames: int = ENCODER_ALONE_FRAMES) -> dict[str, float]:
    """The job's encoder by itself on the clip's first frames, already decoded and in memory: its wall time and
    CPU time a frame, nothing else running in this process. The pace the worker's encoder cannot beat here."""
    with av.open(str(clip), options={"protocol_whitelist": "file"}) as container:
        stream = container.streams.video[0]
        images = [frame.to_ndarray(format="bgr24") for frame in islice(container.decode(stream), frames)]
    height, width = images[0].shape[:2]
    settings = encoder_settings(width, height, Fraction(FPS), {}, frames)
    output = clip.with_name(f"encoder-alone-{width}x{height}.mp4")

    def children_cpu_s() -> float:
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return used.ru_utime + used.ru_stime

    cpu_before, began = children_cpu_s(), time.monotonic()
    argv = [ffmpeg_exe(), *encode_segment_argv(width, height, settings, output)]
    encoder = subprocess.Popen(argv, stdin=subprocess.PIPE)
    assert encoder.stdin is not None
    for image in images:
        encoder.stdin.write(image.data)
    encoder.stdin.close()
    if encoder.wait(timeout=600) != 0:
        raise RuntimeError(f"the encoder alone failed on {clip.name}")
    wall, cpu = time.monotonic() - began, children_cpu_s() - cpu_before
    output.unlink()
    return {
        "frames": len(images),
        "wall_ms_per_frame": round(1000 * wall / len(images), 1),
        "cpu_ms_per_frame": round(1000 * cpu / len(images), 1),
    }


def cpu_s(pids: list[int]) -> float:
    """CPU seconds (user and system) that these processes used, with their finished children's: an ffmpeg
    that exited is counted in its waiting parent's, once. From /proc, not from the worker."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
    return total / tick


class MemoryWatch:
    """Peak resident memory of the render workers of one stack (found by their endpoint), sampled from /proc,
    and the CPU time their process trees used while it watched."""

    def __init__(self, port: int, every_s: float = 0.2) -> None:
        self._port = f":{port}"
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.peak_mb = 0.0
        self._cpu_at_start = 0.0
        self.cpu_used_s = 0.0

    def _workers(self) -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
                if b"gpu_worker" not in command or b"render" not in command:
                    continue
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(item.startswith(b"AWS_ENDPOINT_URL=") and self._port.encode() in item for item in environ):
                found.append(int(entry.name))
        return found

    def sample(self) -> float:
        from gpu_worker.hosting.engine_host import rss_mb

        return sum(rss_mb(pid) for pid in self._workers())

    def cpu_sample(self) -> float:
        from gpu_worker.hosting.engine_host import process_tree

        return sum(cpu_s(process_tree(pid)) for pid in self._workers())

    def __enter__(self) -> MemoryWatch:
        self.peak_mb = self.sample()
        self._cpu_at_start = self.cpu_sample()

        def watch() -> None:
            while not self._stop.wait(self._every_s):
                self.peak_mb = max(self.peak_mb, self.sample())

        self._thread = threading.Thread(target=watch, name="memory-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.cpu_used_s = self.cpu_sample() - self._cpu_at_start


def segment_rows(records: list[SegmentRecord]) -> list[dict[str, Any]]:
    """Each segment's stages and its own time (its render's start to the engine's last frame, `rendered_at`: the
    encoder's tail after it is in its finish, beside the next segment). Pure."""
    rows = []
    for record in sorted(records, key=lambda r: r.started_at):
        own = (record.rendered_at or record.finished_at) - record.started_at
        rows.append(
            {
                "index": record.index,
                "frames": record.frames,
                "segment_s": round(own, 3),
                "finish_s": round(record.finished_at - (record.rendered_at or record.finished_at), 3),
                "engine_s": record.engine_s,
                "stages_s": dict(getattr(record, "stages", {})),  # main's records have none
            }
        )
    return rows


def summary(size: str, clip_s: float, records: list[SegmentRecord], run_row: dict[str, Any]) -> dict[str, Any]:
    """The clip's measures from its segment records. Pure."""
    rows = segment_rows(records)
    frames = sum(r["frames"] for r in rows)
    floor = frames * ENGINE_S_PER_FRAME
    render = float(run_row["render_s"])
    engine = sum(r["engine_s"] for r in rows)
    segments_s = sum(r["segment_s"] for r in rows)
    measured = all(r["stages_s"] for r in rows)  # main's worker records no stages
    stages = {name: round(sum(r["stages_s"].get(name, 0.0) for r in rows), 3) for name in SHOWN} if measured else {}
    return {
        "size": size,
        "clip_s": clip_s,
        "frames": frames,
        "segments": len(rows),
        "engine_floor_s": round(floor, 3),
        "render_s": round(render, 3),
        "render_over_floor": round(render / floor, 3),
        "engine_s": round(engine, 3),
        # The engine's own time over the segments' own time, and over the whole render phase.
        "occupancy_segments": round(engine / segments_s, 3) if measured and segments_s else None,
        "occupancy_render": round(engine / render, 3) if measured and render else None,
        # What each segment costs beyond the engine floor on the critical path, at this size.
        "overhead_per_segment_s": round((render - floor) / len(rows), 3),
        "finish_s_mean": round(statistics.fmean(r["finish_s"] for r in rows), 3),
        "stages_s": stages,
        "segment_rows": rows,
        "end_to_end_s": run_row["end_to_end_s"],
    }


CORES = os.cpu_count() or 1


def cpu_measures(used_s: float, frames: int, cores: int) -> dict[str, float]:
    """The worker's CPU time for a clip, and the render phase it allows at best: all of it spread over
    every core of the machine, nothing else running (LocalStack's share is not in it). Pure."""
    return {
        "worker_cpu_s": round(used_s, 2),
        "worker_cpu_ms_per_frame": round(1000 * used_s / frames, 1),
        "cpu_floor_s": round(used_s / cores, 2),
    }


def goals_met(clips: list[dict[str, Any]], baseline: dict[str, dict[str, float]] | None) -> dict[str, bool | None]:
    """The issue's goals (None: not measured). Pure."""
    by_size = {c["size"]: c for c in clips if "failed" not in c}

    def value(size: str, key: str) -> float | None:
        found = by_size.get(size, {}).get(key)
        return None if found is None else float(found)

    occupancy_1080 = value("1920x1080", "occupancy_segments")
    over_floor = value("1920x1080", "render_over_floor")
    occupancy_2160 = value("3840x2160", "occupancy_segments")
    slower = None
    if baseline:
        # Like with like: the same clip (its frame count) on both sides, else not compared.
        compared = [
            (by_size[size]["render_s"], before["render_s"])
            for size, before in baseline.items()
            if size in by_size and by_size[size]["frames"] == before["frames"]
        ]
        slower = all(now <= before * GOALS["no_slower_than_baseline"] for now, before in compared) if compared else None
    return {
        "occupancy_1080p": None if occupancy_1080 is None else occupancy_1080 >= GOALS["occupancy_1080p"],
        "render_over_floor_1080p": None if over_floor is None else over_floor <= GOALS["render_over_floor_1080p"],
        "occupancy_2160p": None if occupancy_2160 is None else occupancy_2160 >= GOALS["occupancy_2160p"],
        "no_slower_than_baseline": slower,
    }


def calibration(clips: list[dict[str, Any]]) -> dict[str, float]:
    """The fleet simulation's inputs from this benchmark's clips (benchmarks/fleetsim/scenarios.py). Pure."""
    found = {c["size"]: c for c in clips if "failed" not in c}
    sizes = [size for size in SIZES if size in found]
    return {f"overhead_per_segment_{size}_s": float(found[size]["overhead_per_segment_s"]) for size in sizes}


def baseline_renders(path: Path | None) -> dict[str, dict[str, float]] | None:
    """Render phase and frames per size from an earlier results file of this benchmark (main's code), for the
    small sizes."""
    if path is None:
        return None
    data = json.loads(path.read_text())
    return {
        c["size"]: {"render_s": float(c["render_s"]), "frames": int(c["frames"])}
        for c in data["clips"]
        if "failed" not in c and c["size"] in BASELINED
    }


BASELINED = ("320x180", "640x360")


def table(clips: list[dict[str, Any]], baseline: dict[str, dict[str, float]] | None) -> str:
    lines = [
        f"{'size':>10} {'frames':>6} {'segs':>4} {'floor s':>8} {'render s':>8} {'x floor':>7} {'occ seg':>7}"
        f" {'occ run':>7} {'ovh/seg':>7} {'peak MB':>8} {'cpu ms/f':>8} {'cpu floor':>9} {'x264 ms/f':>9}"
        f" {'main s':>7}"
    ]
    for c in clips:
        if "failed" in c:
            lines.append(f"{c['size']:>10} failed: {c['failed'][:90]}")
            continue
        before = (baseline or {}).get(c["size"], {}).get("render_s")
        lines.append(
            f"{c['size']:>10} {c['frames']:>6} {c['segments']:>4} {c['engine_floor_s']:>8.2f} {c['render_s']:>8.2f}"
            f" {c['render_over_floor']:>7.3f} {_maybe(c['occupancy_segments']):>7} {_maybe(c['occupancy_render']):>7}"
            f" {c['overhead_per_segment_s']:>7.3f} {c.get('peak_rss_mb', 0):>8.0f}"
            f" {c.get('worker_cpu_ms_per_frame', 0):>8.1f} {c.get('cpu_floor_s', 0):>9.2f}"
            f" {c.get('encoder_alone', {}).get('wall_ms_per_frame', 0):>9.1f} {_maybe(before, 2):>7}"
        )
    lines.append("\nwhere the segments' time went (seconds, summed over the clip's segments; stages overlap):")
    lines.append(f"{'size':>10} " + " ".join(f"{name[:11]:>11}" for name in SHOWN))
    for c in clips:
        if "failed" not in c and c["stages_s"]:
            lines.append(f"{c['size']:>10} " + " ".join(f"{c['stages_s'][name]:>11.2f}" for name in SHOWN))
    return "\n".join(lines)


def _maybe(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def check_output(path: Path, frames: int) -> dict[str, Any]:
    """The output's frame count and duration, read with PyAV (not the worker's own checks)."""
    found = summarize(path)
    return {
        "frames": found.frame_count,
        "duration_s": round(found.duration_s, 3),
        "frames_ok": found.frame_count == frames,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default=",".join(SIZES), help="frame sizes, comma-separated")
    parser.add_argument("--port", type=int, default=4631)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--lookahead", type=int, default=1, help="the worker's lookahead backlog (0: off)")
    parser.add_argument("--wait", choices=("notice", "poll"), default="notice")
    parser.add_argument("--baseline", type=Path, default=None, help="this benchmark's results file from main's code")
    parser.add_argument("--name", default="occupancy", help="results: benchmarks/results/<name>.json")
    args = parser.parse_args()
    media = ROOT / ".fusionfleet" / "bench-media"
    media.mkdir(parents=True, exist_ok=True)
    sizes = [size for size in args.sizes.split(",") if size]
    clips_media = {}
    for size in sizes:
        width, height = (int(side) for side in size.split("x"))
        clips_media[size] = media / f"occupancy-{SIZES.get(size, 20.0):g}s-{size}.mp4"
        if not clips_media[size].exists():
            print(f"making the {size} clip…", flush=True)
            # Written aside and renamed: a run stopped while writing leaves no short clip to be reused.
            part = clips_media[size].with_suffix(".part.mp4")
            write_video(part, seconds=SIZES.get(size, 20.0), fps=FPS, width=width, height=height)
            part.rename(clips_media[size])
    # The job's x264 by itself at each size, before the stack starts (nothing of the farm running beside it).
    alone = {size: encoder_alone(clips_media[size]) for size in sizes}
    load_at_start = os.getloadavg()
    stack = LocalStack(LocalPaths.discover(ROOT / ".fusionfleet" / "bench-occupancy", env=os.environ), say=print)
    clips: list[dict[str, Any]] = []
    try:
        since = time.time()  # the fleet's workers' log lines from here on are this run's
        bench = fleet(stack, 1, max(round(s * FPS) for s in SIZES.values()), args)
        for size in sizes:
            print(f"one worker, {size}, sleep engine…", flush=True)
            try:
                with MemoryWatch(args.port) as memory:
                    idle_mb = memory.peak_mb
                    row = run(bench, 1, clips_media[size], SIZES.get(size, 20.0), args, since)
                records = [
                    SegmentRecord.model_validate(get_json(bench.storage, bench.resources.work_bucket, key))
                    for key in (layout.segment_record_key(row["job_id"], index) for index in range(row["segments"]))
                ]
                clip = summary(size, SIZES.get(size, 20.0), records, row)
                output = stack.paths.scratch / "overhead-1.mp4"  # fleet_overhead.run downloads it there
                clip["output"] = check_output(output, clip["frames"])
                clip["engine_floor_check_s"] = sleep_engine_s(clip["frames"])  # 0.2 s per 5 frames, by the rules
                clip["peak_rss_mb"] = round(memory.peak_mb, 1)
                clip.update(cpu_measures(memory.cpu_used_s, clip["frames"], CORES))
                clip["encoder_alone"] = alone[size]
                clip["idle_rss_mb"] = round(idle_mb, 1)
                clip["load_average_1m_after"] = row["load_average_1m_after"]
                clips.append(clip)
            except Exception as error:  # a failed run is kept and reported, never dropped
                clips.append({"size": size, "failed": repr(error)[:500]})
    finally:
        stack.down()
    baseline = baseline_renders(args.baseline)
    met = goals_met(clips, baseline)
    report = {
        "benchmark": "occupancy",
        "engine": "copy + slow 0.2 s every 5 output frames (sleep, about 40 ms a frame)",
        "workers": 1,
        "lookahead_min_backlog": args.lookahead,
        "goals": GOALS,
        "goals_met": met,
        "baseline": {"file": str(args.baseline) if args.baseline else None, "render_s": baseline},
        "cores": CORES,
        "load_average_at_start": [round(x, 2) for x in load_at_start],
        "clips": clips,
        "calibration": calibration(clips),
    }
    path = write_results(f"{args.name}.json", report, {**vars(args), "baseline": str(args.baseline)})
    print("\n" + table(clips, baseline))
    print(f"\nload average at start {load_at_start[0]:.2f} (2 cores shared with other work)")
    print(f"goals met: {met}\nwritten to {path}")
    missed = any(value is False for value in met.values()) or any("failed" in c for c in clips)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
