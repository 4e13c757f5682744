"""A farm render matches one machine's render: the same job through `fusionfleet swap` (one range) and
through the local stack (several segments, two workers), compared frame by frame.

The clip cuts, inside the first segment, from the astronaut alone to Grace Hopper (larger, so first in
FaceFusion's default `large-small` order) beside the astronaut. In reference mode the reference face
comes from frame 0 of the whole video (the astronaut), once per job: every segment must swap the
astronaut and leave Grace Hopper alone. A segment that took its reference from its own first frame
would swap Grace Hopper instead.

Frames are decoded with OpenCV's own FFmpeg build, not the pipeline's decoder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from benchmarks.judge import video_frames
from fleetctl.samples import cut_shot_frames, grace_hopper_path, write_video
from fusionfleet import layout
from tests.e2e.conftest import ROOT, Stack
from tests.e2e.helpers import drop_job, notice_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

FRAMES, CUT = 250, 40
# Face boxes after the cut (left, top, right, bottom), as dlib finds them in the generated frames.
GRACE = (154, 134, 334, 314)
ASTRONAUT = (640, 121, 727, 209)
PSNR_GOAL_DB = 40.0


@pytest.fixture(scope="module")
def cut_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("parity") / "cut.mp4"
    return write_video(path, seconds=FRAMES / 25, width=960, height=540, frames=cut_shot_frames(FRAMES, CUT))


def psnr(a: npt.NDArray[np.uint8], b: npt.NDArray[np.uint8]) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def change(before: npt.NDArray[np.uint8], after: npt.NDArray[np.uint8], box: tuple[int, int, int, int]) -> float:
    left, top, right, bottom = box
    return float(np.abs(after[top:bottom, left:right].astype(np.int16) - before[top:bottom, left:right]).mean())


def one_machine(engine: str, target: Path, output: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fleetctl.cli", "swap", "--source", str(grace_hopper_path()), "--target", str(target),
         "--output", str(output), "--engine", engine, "--quality", "realtime"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("engine", ["classic", "copy"])
def test_a_farm_render_equals_one_machines_render(stack: Stack, cut_clip: Path, tmp_path: Path, engine: str) -> None:
    # GIVEN the cut clip rendered on one machine
    single = tmp_path / "single.mp4"
    one_machine(engine, cut_clip, single)
    # WHEN the same job runs on the farm
    inbox = stack.subscribe()
    job = drop_job(stack, f"parity-{engine}", cut_clip, engine=engine, quality="realtime")
    notice = notice_for(stack, inbox, job, wait_s=600)
    assert notice["status"] == "succeeded", notice
    farm = tmp_path / "farm.mp4"
    stack.client("s3").download_file(stack.resources.media_bucket, notice["output"]["key"], str(farm))
    # in several segments, rendered by both workers
    s3, work = stack.client("s3"), stack.resources.work_bucket
    plan = json.loads(s3.get_object(Bucket=work, Key=layout.plan_key(job))["Body"].read())
    records = [json.loads(s3.get_object(Bucket=work, Key=layout.segment_record_key(job, s["index"]))["Body"].read())
               for s in plan]  # fmt: skip
    assert len(plan) >= 2 and all(segment["start_frame"] > CUT for segment in plan[1:])
    workers = {record.get("worker") for record in records}

    # THEN both have every frame, and every frame of the farm's render matches one machine's
    target, ours, theirs = list(video_frames(cut_clip)), list(video_frames(single)), list(video_frames(farm))
    assert len(target) == len(ours) == len(theirs) == FRAMES
    scores = [psnr(a, b) for a, b in zip(ours, theirs, strict=True)]
    worst = int(np.argmin(scores))
    print(
        f"{engine}: farm vs one machine PSNR min {scores[worst]:.2f} dB (frame {worst}), median "
        f"{float(np.median(scores)):.2f} dB; {len(plan)} segments; workers {sorted(map(str, workers))}"
    )
    assert scores[worst] >= PSNR_GOAL_DB, f"frame {worst}: {scores[worst]:.2f} dB"
    if engine != "classic":
        return
    # AND in every segment after the cut the astronaut (the reference person) is swapped and Grace Hopper
    # is left as she is, in both renders
    for segment in plan:
        for index in (max(segment["start_frame"], CUT + 1), segment["end_frame"] - 1):
            for render in (ours, theirs):
                assert change(target[index], render[index], GRACE) < 4, (segment, index)
                assert change(target[index], render[index], ASTRONAUT) > 10, (segment, index)
