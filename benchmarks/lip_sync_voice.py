"""Lip sync's voice per segment, before and after it was extracted once per job (issue 42).

FaceFusion's lip syncer clears its voice cache after every run (lip_syncer.post_process), so a warm
engine re-extracted the voice from the whole audio file in every segment: a job's cost grew with its
audio's length × its segments. Now the job's analysis step extracts it once
(WarmFaceFusionEngine.extract_voice) and every segment cuts its frames from that spectrogram.

Runs the warm engine on FaceFusion 3.8.1's own code with the harness's stand-in models on the CPU
(the voice extractor's stand-in returns its input, so FaceFusion's own chunking, STFTs, resampling and
mel spectrogram are what is timed: a real model adds its inference on top, per extraction). A job with
a `--seconds` voice (60) in `--segments` segments (6), each segment a short run of `--frames` frames (10)
at its own place in the job (frame cost is the same both ways, and the voice cost does not depend on
it). Both ways render every segment, interleaved, `--repeats` times; the fastest repeat of each is
kept (a shared machine's slow spells measure the neighbours). The pictures are compared too: both ways
must give the same frames.

Run from the repository root:
    .venv/bin/python -m benchmarks.lip_sync_voice [--seconds 60] [--segments 6] [--frames 10] [--repeats 2]
Writes benchmarks/results/lip-sync-voice.json and prints a short table.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.goals import Goal, exit_status, goal_table, judge, recorded
from benchmarks.parity.clips import write_voice
from benchmarks.provenance import write_results
from fleetctl.harness import facefusion as harness
from fleetctl.harness.pictures import clip_images, face_image
from fusionfleet.jobs.timeline import Timeline
from gpu_worker.engines.base import EngineJob, Frame
from gpu_worker.engines.facefusion import WarmFaceFusionEngine
from gpu_worker.engines.facefusion.execution import HostFacts
from gpu_worker.engines.facefusion.settings import EngineSettings

FPS = 25
LEAD_IN = 4
# After: a segment costs well under half of what it did with a 60 s voice (its voice is a file read
# and a slicing); the whole job's voice work, the one extraction included, well under half too.
GOALS = (
    Goal("segment_after_over_before", "<", 0.5, "a segment's time, stored voice / extracting it (median)"),
    Goal("job_voice_after_over_before", "<", 0.5, "the job's segments + its one extraction / segments before"),
    Goal("frames_equal", "==", 1.0, "every frame the same both ways"),
)


def _job(work: Path, voice: Path, frame_count: int) -> EngineJob:
    line = Timeline(0, frame_count, FPS, 1, FPS, 1, "same")
    return EngineJob(job_id="voice-bench", sources=(face_image(),), options={"processors": ["lip_syncer"]},
                     fps=float(FPS), work_dir=work, audio=voice, timeline=line)  # fmt: skip


def _segment(first: int, count: int) -> list[Frame]:
    begin = max(0, first - LEAD_IN)
    pictures = clip_images(first + count)[begin:]
    return [
        Frame(index, image, emit=index >= first, number=index)
        for index, image in zip(range(begin, first + count), pictures, strict=True)
    ]


def _render(engine: WarmFaceFusionEngine, job: EngineJob, frames: list[Frame]) -> tuple[float, list[np.ndarray]]:
    started = time.perf_counter()
    images = list(engine.render(job, frames))
    return time.perf_counter() - started, images


def run(seconds: float, segments: int, frames: int, repeats: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="lip-sync-voice-"))
    home = harness.prepare(root)
    facts = HostFacts(providers=("CPUExecutionProvider",), device_count=0, cpu_count=2)
    engine = WarmFaceFusionEngine(EngineSettings(home=home.home, python=home.python), facts, env=home.env)
    engine.prepare()
    try:
        voice = write_voice(root / "voice.wav", seconds)
        total = round(seconds * FPS)
        job = _job(root / "work", voice, total)
        starts = [index * total // segments for index in range(segments)]
        # The first segment on a fresh process loads the models: rendered once, untimed, before either way.
        list(engine.render(job, _segment(0, 2)))
        stored = root / "voice-spectrogram.npy"
        clock = time.perf_counter()
        shape = engine.extract_voice(job, stored)
        extraction_s = time.perf_counter() - clock
        after_job = replace(job, voice=stored)
        before: dict[int, list[float]] = {start: [] for start in starts}
        after: dict[int, list[float]] = {start: [] for start in starts}
        equal = True
        for _ in range(repeats):
            for start in starts:
                segment = _segment(start, frames)
                took_before, old = _render(engine, job, segment)
                took_after, new = _render(engine, after_job, segment)
                before[start].append(took_before)
                after[start].append(took_after)
                same = len(old) == len(new) and all(np.array_equal(a, b) for a, b in zip(old, new, strict=True))
                equal = equal and same
    finally:
        engine.close()
    fastest_before = [min(before[start]) for start in starts]
    fastest_after = [min(after[start]) for start in starts]
    median_before, median_after = statistics.median(fastest_before), statistics.median(fastest_after)
    return {
        "voice_s": seconds,
        "segments": segments,
        "frames_per_segment": frames,
        "repeats": repeats,
        "spectrogram_shape": list(shape),
        "spectrogram_bytes": stored.stat().st_size if stored.exists() else None,
        "extraction_once_s": round(extraction_s, 3),
        "segment_before_s": [round(value, 3) for value in fastest_before],
        "segment_after_s": [round(value, 3) for value in fastest_after],
        "segment_before_median_s": round(median_before, 3),
        "segment_after_median_s": round(median_after, 3),
        "job_before_s": round(sum(fastest_before), 3),
        "job_after_s": round(extraction_s + sum(fastest_after), 3),
        "all_times_s": {"before": before, "after": after},
        "measures": {
            "segment_after_over_before": round(median_after / median_before, 4),
            "job_voice_after_over_before": round((extraction_s + sum(fastest_after)) / sum(fastest_before), 4),
            "frames_equal": 1.0 if equal else 0.0,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--segments", type=int, default=6)
    parser.add_argument("--frames", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--name", default="lip-sync-voice.json")
    args = parser.parse_args(argv)
    report = run(args.seconds, args.segments, args.frames, args.repeats)
    verdicts = judge(GOALS, report["measures"])
    config = {"seconds": args.seconds, "segments": args.segments, "frames": args.frames, "repeats": args.repeats,
              "engine": "warm FaceFusion 3.8.1, harness stand-in models, CPU"}  # fmt: skip
    path = write_results(args.name, {**report, **recorded(verdicts)}, config)
    print(f"voice {args.seconds:g} s, {args.segments} segments of {args.frames} frames; extraction once "
          f"{report['extraction_once_s']} s")  # fmt: skip
    print(f"segment before (extracting) {report['segment_before_s']} s, median {report['segment_before_median_s']}")
    print(f"segment after (stored)      {report['segment_after_s']} s, median {report['segment_after_median_s']}")
    print(f"job: before {report['job_before_s']} s, after {report['job_after_s']} s (one extraction included)")
    print(goal_table(verdicts))
    print(f"written to {path}")
    return exit_status(verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
