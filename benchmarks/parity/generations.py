"""How far each generation of a chained render sits from its target, where no step draws: the mean B/G/R
and the PSNR against the target of a strip of the frame no face reaches (the TWO clip's top rows).

FaceFusion's job-run encodes and decodes every step's video for the next step; the farm's passes hand frames
on in memory and encode once. This reads the kept renders of a job-parity case (FaceFusion's step files and
the farm's output; `make bench-parity` keeps them under its work folder) with OpenCV's decoder, which neither
side's encoder uses, and says how far each is from the target, so a case's `deliberate` text quotes a
measurement. Goal: the farm's strip is within 0.1 level of FaceFusion's one-encode step 1 (the farm's output
is one encode from its target too, and no pass of the farm's touched that strip).

    python -m benchmarks.parity.generations --target T.mp4 --first 20 --last 280 \\
        --render step-1=ff-0.mp4 --render step-2=ff-1.mp4 --render farm=farm.mp4 --results NAME
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.goals import Goal, conclude, judge, recorded
from benchmarks.parity import media
from benchmarks.parity.judge import psnr
from benchmarks.provenance import write_results

STRIP_ROWS = 40  # the TWO clip's top rows: above every face, drawn by no step
GOALS = (
    Goal(
        "farm_strip_off_step_1", "<=", 0.1, "the farm's strip against FaceFusion's step 1: most a channel's mean moved"
    ),
)


def strip_figures(frames: list[Any], target: list[Any]) -> dict[str, Any]:
    """The strip's mean B/G/R over every frame, and its mean PSNR against the target's same frames. Pure."""
    strips = [frame[:STRIP_ROWS] for frame in frames]
    mean = np.mean([strip.reshape(-1, 3).mean(0) for strip in strips], axis=0)
    against = [psnr(strip, own[:STRIP_ROWS]) for strip, own in zip(strips, target, strict=True)]
    return {"mean_bgr": [round(float(v), 2) for v in mean], "psnr_db": round(float(np.mean(against)), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", type=Path, required=True)
    parser.add_argument("--first", type=int, default=0, help="the target's first frame the renders hold")
    parser.add_argument("--last", type=int, help="the target's frame after the renders' last")
    parser.add_argument("--render", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--step-1", default="step-1", help="the render that is FaceFusion's one-encode step 1")
    parser.add_argument("--farm", default="farm", help="the render that is the farm's")
    parser.add_argument("--results", default="parity-generations.json")
    args = parser.parse_args(argv)
    target = media.frames(args.target)[args.first : args.last]
    renders = dict(item.split("=", 1) for item in args.render)
    figures = {"target": strip_figures(target, target)}
    for name, path in renders.items():
        frames = media.frames(Path(path))
        if len(frames) != len(target):
            raise SystemExit(f"{name}: {len(frames)} frames against the target's {len(target)}")
        figures[name] = strip_figures(frames, target)
    off = max(abs(a - b) for a, b in zip(figures[args.farm]["mean_bgr"], figures[args.step_1]["mean_bgr"], strict=True))
    verdicts = judge(GOALS, {"farm_strip_off_step_1": round(off, 2)})
    for name, found in figures.items():
        print(f"{name:10} mean B/G/R {'/'.join(f'{v:.1f}' for v in found['mean_bgr'])}  {found['psnr_db']:.2f} dB")
    report = {"strip_rows": STRIP_ROWS, "frames": len(target), "renders": figures, **recorded(verdicts)}
    written = write_results(args.results, report, {"target": str(args.target), "first": args.first,
                                                    "last": args.last, "renders": renders})  # fmt: skip
    return conclude(verdicts, written)


if __name__ == "__main__":
    raise SystemExit(main())
