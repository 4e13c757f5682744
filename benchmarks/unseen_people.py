"""The built-in engine on people it was never tuned on: real photos the packages ship of people who are neither
Grace Hopper nor the astronaut (the two faces every other measurement is made of).

- scikit-image's "camera" photo (CC0, Lav Varshney): a man filming, his face turned three-quarters
  away, grey-scale, about 70 pixels.
- scikit-image's LFW subset (`skimage.data.lfw_subset`): 100 real people from Labeled Faces in the
  Wild, grey-scale 25 × 25 crops, here scaled 8 × (bicubic) and padded by repeating their edges, as
  a user might upload a small, old photo.

Each is the source of `fusionfleet swap` (the classic engine, `balanced`) on the astronaut camera path,
and the judge (benchmarks.judge: dlib's CNN detector, 5-point alignment and ResNet descriptor, none of
which the engine swaps with; frames decoded by OpenCV) measures every target face it re-finds in the
output, at the same place:

- identity share: the output face closer to its source than to the original person (the quality
  benchmark's measure, with its 0.8 goal);
- identification: among every candidate source plus the original person, the output face is nearest
  its own source. Blurred sources look alike to a descriptor (they share the blur, not the person),
  so "closer to the source than to the original" can be met by any blurred stranger; being nearest to
  the right stranger cannot (chance is one in the number of candidates). Goal 0.8.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from benchmarks.clips import FPS, HEIGHT, WIDTH
from benchmarks.goals import Goal, exit_status, goal_table, judge, recorded
from benchmarks.judge import SAME_PLACE_IOU, Face, Judge, iou, video_frames
from benchmarks.provenance import write_results
from fleetctl import samples

ROOT = Path(__file__).resolve().parents[1]
IDENTITY_GOAL = 0.8
IDENTIFICATION_GOAL = 0.8
LFW_SCALE, LFW_PAD = 8, 60
# The camera photo's head (the face the judge finds there is at about (186, 116)-(257, 185)).
CAMERAMAN_HEAD = (80, 20, 360, 300)  # left, top, right, bottom
Descriptor = npt.NDArray[np.float64]
# Run alone (`make bench-unseen`), the same two goals `make bench-quality` checks among its others.
GOALS = (
    Goal("identity_share", ">=", IDENTITY_GOAL, "unseen people: output face closer to its source"),
    Goal("identification_share", ">=", IDENTIFICATION_GOAL, "unseen people: output face nearest its own source"),
)


def lfw_face(index: int) -> npt.NDArray[np.uint8]:
    """Person `index` of scikit-image's LFW subset, scaled up and padded, as a BGR source image."""
    from skimage import data

    grey = np.asarray(data.lfw_subset()[index] * 255, dtype=np.uint8)  # type: ignore[no-untyped-call]
    side = grey.shape[0] * LFW_SCALE
    large = cv2.resize(grey, (side, side), interpolation=cv2.INTER_CUBIC)
    padded = cv2.copyMakeBorder(large, LFW_PAD, LFW_PAD, LFW_PAD, LFW_PAD, cv2.BORDER_REPLICATE)
    return np.ascontiguousarray(cv2.cvtColor(padded, cv2.COLOR_GRAY2BGR))


def cameraman() -> npt.NDArray[np.uint8]:
    from skimage import data

    left, top, right, bottom = CAMERAMAN_HEAD
    grey = np.asarray(data.camera()[top:bottom, left:right], dtype=np.uint8)  # type: ignore[no-untyped-call]
    return np.ascontiguousarray(cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR), dtype=np.uint8)


def source_names(people: int) -> list[str]:
    return ["skimage-camera", *(f"lfw-{index:02d}" for index in range(people))]


def source_image(name: str) -> npt.NDArray[np.uint8]:
    return lfw_face(int(name.removeprefix("lfw-"))) if name.startswith("lfw-") else cameraman()


def _swap(source: Path, target: Path, output: Path) -> str | None:
    """`fusionfleet swap` with the classic engine; None when it rendered, else its last words."""
    done = subprocess.run(
        [sys.executable, "-m", "gpu_worker", "swap", "--source", str(source), "--target", str(target),
         "--output", str(output), "--engine", "classic", "--quality", "balanced", "--face-selector-mode", "one"],
        cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"


def _sampled(path: Path, every: int) -> list[npt.NDArray[np.uint8]]:
    return [frame for index, frame in enumerate(video_frames(path)) if index % every == 0]


def swap_one(name: str, target: Path, folder: Path, every: int) -> dict[str, Any]:
    """One source's swap, its judged output faces (descriptors and boxes) per sampled frame."""
    judge = Judge()
    image = source_image(name)
    source = folder / f"{name}.png"
    cv2.imwrite(str(source), image)
    output = folder / f"{name}-out.mp4"
    began = time.perf_counter()
    refused = _swap(source, target, output)
    result: dict[str, Any] = {"source": name, "swap_s": round(time.perf_counter() - began, 1), "refused": refused}
    try:
        result["identity"] = judge.identity(image).tolist()
    except ValueError:
        result["identity"] = None  # the judge finds no face in it either
    if refused is None:
        result["outputs"] = [judge.faces(frame) for frame in _sampled(output, every)]
    return result


def _nearest(descriptor: Descriptor, candidates: dict[str, Descriptor]) -> str:
    return min(candidates, key=lambda name: float(np.linalg.norm(descriptor - candidates[name])))


def summarise(targets: Sequence[Sequence[Face]], swaps: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per source and over all: identity share and identification among every candidate (pure)."""
    identities = {s["source"]: np.asarray(s["identity"]) for s in swaps if s["identity"] is not None}
    original = np.mean([face.descriptor for faces in targets for face in faces], axis=0)
    candidates = {**identities, "original person": original}
    rows, faces_total, closer_total, named_total = [], 0, 0, 0
    for swap in swaps:
        row: dict[str, Any] = {"source": swap["source"], "refused": swap["refused"], "swap_s": swap["swap_s"]}
        faces = closer = named = 0
        if swap["refused"] is not None or swap["source"] not in identities:
            faces = sum(len(before) for before in targets)  # every face it should have swapped is a miss
        else:
            own = identities[swap["source"]]
            for before, after in zip(targets, swap["outputs"], strict=True):
                for face in before:
                    faces += 1
                    match = max(after, key=lambda other: iou(face.box, other.box), default=None)
                    if match is None or iou(face.box, match.box) < SAME_PLACE_IOU:
                        continue
                    descriptor = match.descriptor
                    closer += int(np.linalg.norm(descriptor - own) < np.linalg.norm(descriptor - face.descriptor))
                    named += int(_nearest(descriptor, candidates) == swap["source"])
        row.update(target_faces=faces, closer_to_source=closer, identified=named)
        rows.append(row)
        faces_total, closer_total, named_total = faces_total + faces, closer_total + closer, named_total + named
    judged = [row for row in rows if row["refused"] is None]
    judged_faces = sum(row["target_faces"] for row in judged)
    strangers = [float(np.linalg.norm(identities[a] - identities[b])) for a in identities for b in identities if a < b]
    return {
        "sources": len(swaps),
        "refused": [row["source"] for row in rows if row["refused"] is not None],
        "rendered": len(judged),
        "target_faces": faces_total,
        # Over every target face of every source: a refused source scores nothing.
        "identity_share": closer_total / faces_total if faces_total else 0.0,
        "identification_share": named_total / faces_total if faces_total else 0.0,
        "identification_chance": 1 / len(candidates) if candidates else None,
        # The same over the sources the engine took (what a user whose photo it accepts gets).
        "identity_share_taken": sum(row["closer_to_source"] for row in judged) / judged_faces if judged_faces else 0.0,
        "identification_share_taken": sum(row["identified"] for row in judged) / judged_faces if judged_faces else 0.0,
        "mean_distance_between_sources": float(np.mean(strangers)) if strangers else None,
        "rows": rows,
    }


def start(
    pool: Executor, people: int, frames: int, every: int, folder: Path
) -> tuple[Path, list[Future[dict[str, Any]]]]:
    """The target clip, and one swap per source judged in the pool (the CNN judge takes most of the time)."""
    target = samples.write_video(
        folder / "astronaut.mp4", seconds=frames / FPS, fps=FPS, width=WIDTH, height=HEIGHT,
        frames=samples.astronaut_frames(frames, WIDTH, HEIGHT),
    )  # fmt: skip
    return target, [pool.submit(swap_one, name, target, folder, every) for name in source_names(people)]


def run(pool: Executor, people: int = 8, frames: int = 25, every: int = 5) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="unseen-people-") as scratch:
        folder = Path(scratch)
        target, futures = start(pool, people, frames, every, folder)
        judge = Judge()
        targets = [judge.faces(frame) for frame in _sampled(target, every)]
        swaps = [future.result() for future in futures]
    report = summarise(targets, swaps)
    report.update(people=people, frames=frames, judged_every=every, target="astronaut camera path 640x360")
    return report


def goals(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    share, named = report["identity_share"], report["identification_share"]
    return {
        "identity_share[unseen-people]": {"value": share, "goal": f">= {IDENTITY_GOAL:g}",
                                          "pass": share >= IDENTITY_GOAL},
        "identification_share[unseen-people]": {"value": named, "goal": f">= {IDENTIFICATION_GOAL:g}",
                                                "pass": named >= IDENTIFICATION_GOAL},
    }  # fmt: skip


def table(report: dict[str, Any]) -> str:
    lines = [f"unseen people on the astronaut ({report['frames']} frames, every {report['judged_every']}th judged):"]
    lines.append(f"{'source':<16}{'target faces':>13}{'closer to source':>18}{'identified':>12}  refused")
    for row in report["rows"]:
        lines.append(
            f"{row['source']:<16}{row['target_faces']:>13}{row['closer_to_source']:>18}{row['identified']:>12}  "
            f"{row['refused'] or '-'}"
        )
    lines.append(
        f"all: identity share {report['identity_share']:.2f}, identification {report['identification_share']:.2f} "
        f"(chance {report['identification_chance']:.2f}), {len(report['refused'])} of {report['sources']} refused; "
        f"of the sources taken: {report['identity_share_taken']:.2f} and {report['identification_share_taken']:.2f}"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The unseen-people measurement alone: the judge's memory and an hour of CPU are the quality
    benchmark's other parts, which a user of this figure does not need."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=8, help="people of the LFW subset used as sources")
    parser.add_argument("--frames", type=int, default=25, help="frames of the clip each is swapped onto")
    parser.add_argument("--every", type=int, default=5, help="judge every Nth frame")
    parser.add_argument("--jobs", type=int, default=1, help="swaps judged at once")
    args = parser.parse_args(argv)
    with ProcessPoolExecutor(max(1, args.jobs)) as pool:
        report = run(pool, args.people, args.frames, args.every)
    verdicts = judge(GOALS, {goal.measure: report[goal.measure] for goal in GOALS})
    write_results("unseen-people.json", {"engine": "classic", "quality_preset": "balanced", **report,
                                         **recorded(verdicts)}, vars(args))  # fmt: skip
    print(table(report))
    print(goal_table(verdicts))
    return exit_status(verdicts)


if __name__ == "__main__":
    raise SystemExit(main())
