"""Job files written by FaceFusion 3.8.1's own job commands (`job-create`, `job-add-step`, `job-remix-step`),
run in the harness's FaceFusion folder: what `submit --facefusion-job` reads, never written by hand."""

from __future__ import annotations

import subprocess
from pathlib import Path

import cv2
import pytest

from tests.support import facefusion_harness as harness
from tests.support.media import write_video

TIMEOUT_S = 120


def job_command(home: harness.Harness, jobs: Path, *argv: str) -> None:
    """One of FaceFusion's job commands on the jobs folder `jobs`; the test fails with its words if it fails."""
    done = subprocess.run(
        [home.python, "facefusion.py", *argv, "--jobs-path", str(jobs)],
        cwd=home.home, env=home.env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"facefusion.py {' '.join(argv)} exited with {done.returncode}: {done.stdout}{done.stderr}")


def drafted(jobs: Path, job_id: str) -> Path:
    """The job file FaceFusion keeps for a job it has not submitted (its `.jobs/drafted/ID.json`)."""
    return jobs / "drafted" / f"{job_id}.json"


def face(folder: Path) -> Path:
    """The harness's face, as a PNG source."""
    path = folder / "face.png"
    assert cv2.imwrite(str(path), harness.face_image())
    return path


def clip(folder: Path, frames: int, fps: int = 25) -> Path:
    """`frames` frames of the harness's face (its background shade steps every 5 frames), with audio."""
    width, height = harness.SIZE
    images = [harness.face_image(shade=(index // 5) % 8) for index in range(frames)]
    path = folder / "clip.mp4"
    return write_video(path, seconds=frames / fps, fps=fps, width=width, height=height, frames=images, crf=12)
