"""A parity case whose target is a picture (FaceFusion's image-to-image workflow): FaceFusion's own headless-run
and the farm's job of the same image, judged pixel by pixel, colour and alpha.

A picture has no frames, sound or timing to compare, so the video judge is not used: the two outputs must have
the same size, both an alpha channel or neither (background_remover's matte, where the formats keep it), the
colour at least PSNR_GOAL dB apart where either shows it (a pixel transparent in both shows no colour) and, in a
lossless format, the same alpha to the level; in a lossy one (WebP) within ALPHA_LOSSY_LEVELS on average.
Decoded with OpenCV (libpng,
libwebp), not the farm's FFmpeg.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from benchmarks.parity.farm import Farm
from benchmarks.parity.judge import PSNR_GOAL, Difference, Verdict, psnr
from benchmarks.parity.run import Case, Outcome, render_facefusion
from fleetctl.harness.facefusion import Harness

LOSSLESS = frozenset({".png", ".bmp", ".tif", ".tiff"})
ALPHA_LOSSY_LEVELS = 0.25  # two libwebp builds' rounding of one matte (measured 0.06 mean on the harness)


def judge_pictures(theirs: Path, ours: Path) -> Verdict:
    """FaceFusion's picture against the farm's."""
    first, second = cv2.imread(str(theirs), cv2.IMREAD_UNCHANGED), cv2.imread(str(ours), cv2.IMREAD_UNCHANGED)
    if first is None or second is None:
        unread = theirs if first is None else ours
        return Verdict([Difference("unreadable", f"{unread.name} cannot be decoded")], [1, 1], None, {})
    found: list[Difference] = []
    size = [[first.shape[1], first.shape[0]], [second.shape[1], second.shape[0]]]
    if first.shape[:2] != second.shape[:2]:
        found.append(Difference("size", f"size {size[0]} against {size[1]}"))
        return Verdict(found, [1, 1], None, {}, size=size)
    alphas = [image.shape[2] == 4 if image.ndim == 3 else False for image in (first, second)]
    # Where both have alpha, a pixel transparent in both shows nothing: its colour is the encoder's to choose (a
    # lossy WebP's libwebp leaves what it likes there), so the colour is compared where either side shows it.
    shown = np.ones(first.shape[:2], bool)
    if all(alphas):
        shown = (first[:, :, 3] > 0) | (second[:, :, 3] > 0)
    colour = psnr(np.asarray(first[:, :, :3][shown], np.uint8), np.asarray(second[:, :, :3][shown], np.uint8))
    if colour < PSNR_GOAL:
        found.append(Difference("psnr", f"colour PSNR {colour:.2f} dB (at least {PSNR_GOAL:g})", colour))
    content: dict[str, object] = {"alpha": alphas}
    if alphas[0] != alphas[1]:
        found.append(Difference("alpha", f"alpha: FaceFusion's {'has' if alphas[0] else 'has none'}, the farm's "
                                         f"{'has' if alphas[1] else 'has none'}"))  # fmt: skip
    elif alphas[0]:
        difference = np.abs(first[:, :, 3].astype(int) - second[:, :, 3].astype(int))
        mean, most = float(difference.mean()), int(difference.max())
        content |= {"alpha_mean_levels": round(mean, 3), "alpha_max_levels": most,
                    "transparent_fraction": round(float((first[:, :, 3] < 128).mean()), 3)}  # fmt: skip
        lossless = theirs.suffix.lower() in LOSSLESS
        if (most > 0) if lossless else (mean > ALPHA_LOSSY_LEVELS):
            found.append(Difference("alpha", f"alpha {mean:.3f} levels apart on average, {most} at most", mean))
    return Verdict(found, [1, 1], colour, {}, median_psnr=colour, size=size, content=content)


def run_picture_case(
    case: Case, harness: Harness, farm: Farm, sources: Sequence[Path], target: Path, work: Path
) -> Outcome:
    """Render the picture both ways (the farm first: a refusal leaves nothing to compare) and judge."""
    outcome = Outcome(case)
    folder = work / case.name
    folder.mkdir(parents=True, exist_ok=True)
    run = farm.render(sources, target, case.options, folder / f"farm{target.suffix}", name=case.name)
    outcome.farm = run
    if run.status != "succeeded" or run.output is None:
        outcome.problems.append(f"the farm's job {run.status}: {run.reason}")
        return outcome
    ours = render_facefusion(outcome, harness, sources, target, folder)
    if ours is None:
        return outcome
    outcome.verdict = judge_pictures(ours, run.output)
    return outcome
