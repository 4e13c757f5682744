"""Fixed cost per segment of the FaceFusion engines: one `headless-run` per segment vs the warm one.

Runs both engines on FaceFusion 3.8.1's own code with the harness's stand-in models on the CPU
(tests/support/facefusion_harness.py: FUSIONFLEET_FACEFUSION_SOURCE and `make facefusion-env`).
Each engine renders segments of two lengths; a segment's time is fixed cost + frames × per-frame
cost, so the fixed cost is the intercept of the line through them (from the fastest repeats). The
warm engine's is too small for that fit on a busy machine, so it is also measured directly: a
segment's wall time less the time FaceFusion spent on its frames (the smallest of the repeats).
The warm engine is measured on segments after its first; its first segment on a fresh worker (process
start, FaceFusion's imports, every model loaded) is reported on its own, with the inference
sessions each segment created. The old path's fixed cost is also split into its parts, each timed
on its own: interpreter start with FaceFusion's imports, model loading, and the video round trip.

Run from the repository root:
    FUSIONFLEET_FACEFUSION_SOURCE=/path/to/facefusion-3.8.1 .venv/bin/python -m benchmarks.facefusion_fixed_cost
Writes benchmarks/results/facefusion_fixed_cost.json and prints a short table.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.provenance import write_results
from gpu_worker.engines.base import EngineJob
from gpu_worker.engines.facefusion import FaceFusionEngine, WarmFaceFusionEngine
from gpu_worker.engines.facefusion.execution import HostFacts
from gpu_worker.engines.facefusion.media import read_output, write_target
from gpu_worker.engines.facefusion.settings import EngineSettings
from tests.support import facefusion_harness as harness

RESULTS = Path(__file__).resolve().parent / "results"
GOAL_FIXED_SHARE = 0.05  # the warm engine's fixed cost, as a share of the old path's
SHORT, LONG = 4, 16  # frames per segment

_IMPORTS = "import facefusion.core, facefusion.workflows.to_video, facefusion.processors.modules.face_swapper.core"
_LOAD_MODELS = """
import glob, json, time, onnxruntime
started = time.perf_counter()
for path in sorted(glob.glob('.assets/models/*.onnx')):
    onnxruntime.InferenceSession(path, providers=['CPUExecutionProvider'])
print(json.dumps(time.perf_counter() - started))
"""


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _fixed_and_per_frame(short_s: list[float], long_s: list[float]) -> tuple[float, float]:
    # The fastest of the repeats: on a shared machine the others measure the neighbours too.
    short, long = min(short_s), min(long_s)
    per_frame = (long - short) / (LONG - SHORT)
    return short - SHORT * per_frame, per_frame


def _job(work: Path) -> EngineJob:
    # FaceFusion's content analyser samples one frame a second: at SHORT frames a second its work
    # grows with the segment, as it does over real segments of seconds, and is not fixed cost.
    options = {"face_selector_mode": "one"}
    return EngineJob(job_id="bench", sources=(harness.face_image(),), options=options, fps=SHORT, work_dir=work)


def _render(engine: Any, job: EngineJob, frames: int) -> float:
    clip = harness.clip(frames)
    return _timed(lambda: list(engine.render(job, clip)))


def measure(repeats: int) -> dict[str, Any]:
    facts = HostFacts(providers=("CPUExecutionProvider",), device_count=0, cpu_count=2)
    with tempfile.TemporaryDirectory(prefix="facefusion-bench-") as scratch:
        home = harness.prepare(Path(scratch))
        settings = EngineSettings(home=home.home, python=home.python)
        job = _job(Path(scratch) / "work")

        old = FaceFusionEngine(settings, facts, env=home.env)
        old.prepare()
        old_short = [_render(old, job, SHORT) for _ in range(repeats)]
        old_long = [_render(old, job, LONG) for _ in range(repeats)]
        old.close()

        warm = WarmFaceFusionEngine(settings, facts, env=home.env)
        start_s = _timed(warm.prepare)
        first_s = _render(warm, job, SHORT)
        first_loads = warm.stats.session_loads
        warm_short: list[float] = []
        warm_long: list[float] = []
        later_loads: list[int] = []
        overheads: list[float] = []
        for _ in range(repeats):
            for frames, times in ((SHORT, warm_short), (LONG, warm_long)):
                times.append(_render(warm, job, frames))
                later_loads.append(warm.stats.session_loads)
                # Directly: the segment's wall time less FaceFusion's time on its frames.
                overheads.append(times[-1] - warm.stats.phases["frames_s"])
        phases = warm.stats.phases
        warm.close()

        # The old path's fixed cost in parts, each on its own.
        imports_s = statistics.median(
            _timed(lambda: subprocess.run([home.python, "-c", _IMPORTS], cwd=home.home, env=home.env, check=True))
            for _ in range(repeats)
        )
        models_s = statistics.median(
            float(
                subprocess.run(
                    [home.python, "-c", _LOAD_MODELS], cwd=home.home, env=home.env, check=True, capture_output=True
                ).stdout
            )
            for _ in range(repeats)
        )
        target = Path(scratch) / "target.mov"
        written = write_target(harness.clip(SHORT), target, 25.0, None)
        assert written is not None
        write_s = _timed(lambda: write_target(harness.clip(SHORT), target, 25.0, None))
        read_s = _timed(lambda: list(read_output(target, written, "")))

    _, old_fit = _fixed_and_per_frame(old_short, old_long)
    # Where the machine's noise makes the slope negative, no frame cost is taken off: the fixed cost
    # is then at most the short segment's whole time, an overstatement of a few frames' work.
    old_per_frame = max(0.0, old_fit)
    old_fixed = min(old_short) - SHORT * old_per_frame
    old_parts = imports_s + models_s + write_s + read_s
    warm_fit, warm_per_frame = _fixed_and_per_frame(warm_short, warm_long)
    warm_fixed = min(overheads)
    return {
        "machine": "CPU (CPUExecutionProvider), stand-in models, 320x240 frames",
        "segment_frames": [SHORT, LONG],
        "repeats": repeats,
        "per_segment": {
            "fixed_cost_s": round(old_fixed, 4),
            "per_frame_s": round(old_per_frame, 4),
            "per_frame_fit_s": round(old_fit, 4),
            "segment_s": {"short": old_short, "long": old_long},
            "parts_s": {
                "interpreter_and_facefusion_imports": round(imports_s, 4),
                "model_loading": round(models_s, 4),
                "video_write_and_read_back_4_frames": round(write_s + read_s, 4),
            },
        },
        "warm": {
            "fixed_cost_s": round(warm_fixed, 4),
            "fixed_cost_fit_s": round(warm_fit, 4),
            "fixed_cost_direct_s": [round(overhead, 4) for overhead in overheads],
            "last_segment_phases_s": phases,
            "per_frame_s": round(warm_per_frame, 4),
            "segment_s": {"short": warm_short, "long": warm_long},
            "fresh_worker": {
                "process_start_s": round(start_s, 4),
                "first_segment_s": round(first_s, 4),
                "first_segment_session_loads": first_loads,
            },
            "later_segment_session_loads": later_loads,
        },
        "fixed_cost_share": round(warm_fixed / old_fixed, 4) if old_fixed else None,
        # Against the sum of the old path's measured parts alone (a lower bound of its fixed cost).
        "fixed_cost_share_of_parts": round(warm_fixed / old_parts, 4) if old_parts else None,
        "goal_fixed_cost_share": GOAL_FIXED_SHARE,
    }


def table(result: dict[str, Any]) -> str:
    old, warm = result["per_segment"], result["warm"]
    fresh = warm["fresh_worker"]

    def row(name: str, engine: dict[str, Any]) -> tuple[str, ...]:
        times = engine["segment_s"]
        return (name, f"{engine['fixed_cost_s']:.3f} s", f"{engine['per_frame_s']:.3f} s",
                f"{min(times['short']):.3f} s", f"{min(times['long']):.3f} s")  # fmt: skip

    header = ("engine", "fixed cost/segment", "per frame", f"{SHORT}-frame segment", f"{LONG}-frame segment")
    rows = [header, row("per-segment", old), row("warm", warm)]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    parts = ", ".join(f"{name} {seconds:.3f} s" for name, seconds in old["parts_s"].items())
    lines += [
        f"warm fixed cost = {100 * (result['fixed_cost_share'] or 0):.1f} % of the per-segment engine's, "
        f"{100 * (result['fixed_cost_share_of_parts'] or 0):.1f} % of its measured parts alone "
        f"(goal < {100 * GOAL_FIXED_SHARE:.0f} %)",
        f"fresh warm worker: process start {fresh['process_start_s']:.3f} s, first {SHORT}-frame segment "
        f"{fresh['first_segment_s']:.3f} s with {fresh['first_segment_session_loads']} inference sessions created; "
        f"later segments created {sum(warm['later_segment_session_loads'])}",
        f"per-segment engine's fixed cost in parts: {parts}",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    reason = harness.skip_reason()
    if reason:
        raise SystemExit(f"cannot run: {reason}")
    result = measure(args.repeats)
    RESULTS.mkdir(exist_ok=True)
    write_results("facefusion_fixed_cost.json", result, vars(args))
    print(table(result))


if __name__ == "__main__":
    main()
