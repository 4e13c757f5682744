"""The classic engine's output as a viewer gets it: each clip rendered by `fusionfleet swap` (encoded, with
the job's encoder), decoded with OpenCV, and judged by benchmarks.judge (a detector, aligner and
frame decoder the engine does not use)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

import cv2

from benchmarks.clips import CLIPS, FPS, HEIGHT, WIDTH, Clip
from benchmarks.judge import Judge, Verdict, video_frames
from fleetctl import samples

ROOT = Path(__file__).resolve().parents[1]
IDENTITY_GOAL = 0.8
BACKGROUND_GOAL_DB = 35.0


def render(clip: Clip, folder: Path, frames: int, quality: str) -> tuple[Path, Path, float]:
    """The clip's target video and `fusionfleet swap`'s output of it; and the swap's wall time."""
    target = samples.write_video(
        folder / f"{clip.name}.mp4", seconds=frames / FPS, fps=FPS, width=WIDTH, height=HEIGHT,
        frames=clip.frames(frames),
    )  # fmt: skip
    source = folder / f"{clip.name}-source.png"
    cv2.imwrite(str(source), clip.source())
    output = folder / f"{clip.name}-out.mp4"
    flags = [arg for name, value in clip.options.items() for arg in ("--" + name.replace("_", "-"), value)]
    began = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "gpu_worker", "swap", "--source", str(source), "--target", str(target),
         "--output", str(output), "--engine", "classic", "--quality", quality, *flags],
        cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise SwapRefused(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "no output")
    return target, output, time.perf_counter() - began


class SwapRefused(Exception):
    """`fusionfleet swap` ended without an output: a failed clip, reported with its reason."""


def judge_clip(judge: Judge, clip: Clip, frames: int, every: int, quality: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"quality-{clip.name}-") as folder:
        try:
            target, output, swap_s = render(clip, Path(folder), frames, quality)
        except SwapRefused as refused:
            # A clip the engine cannot render at all scores nothing: it is a failure, not a gap.
            return {"clip": clip.name, "what": clip.what, "options": clip.options, "error": str(refused),
                    "target_faces": None, "redetected_share": None, "identity_share": 0.0,
                    "mean_distance_to_source": None, "mean_distance_to_target": None,
                    "background_psnr_db": 0.0, "swap_s": None}  # fmt: skip
        identity = judge.identity(clip.source())
        verdict = Verdict()
        for index, (before, after) in enumerate(zip(video_frames(target), video_frames(output), strict=True)):
            if index % every == 0:
                verdict.add_frame(judge, identity, before, after)
    return {"clip": clip.name, "what": clip.what, "options": clip.options, "swap_s": round(swap_s, 2),
            "sampled_frames": -(-frames // every), **verdict.summary()}  # fmt: skip


def _judge_one(name: str, frames: int, every: int, quality: str) -> dict[str, Any]:
    clip = next(clip for clip in CLIPS if clip.name == name)
    return judge_clip(Judge(), clip, frames, every, quality)


def start_judged_run(pool: Executor, frames: int, every: int, quality: str) -> list[Future[dict[str, Any]]]:
    """Every clip judged in its own process: the judge's CNN detector takes most of the run's time."""
    return [pool.submit(_judge_one, clip.name, frames, every, quality) for clip in CLIPS]


def judged_run(frames: int, every: int, quality: str) -> list[dict[str, Any]]:
    judge = Judge()
    return [judge_clip(judge, clip, frames, every, quality) for clip in CLIPS]


def judged_goals(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    goals = {}
    for result in results:
        share, psnr = result["identity_share"], result["background_psnr_db"]
        goals[f"identity_share[{result['clip']}]"] = {
            "value": share, "goal": f">= {IDENTITY_GOAL:g}", "pass": share is not None and share >= IDENTITY_GOAL,
        }  # fmt: skip
        goals[f"background_psnr_db[{result['clip']}]"] = {
            "value": psnr, "goal": f">= {BACKGROUND_GOAL_DB:g}", "pass": psnr >= BACKGROUND_GOAL_DB,
        }  # fmt: skip
    return goals
