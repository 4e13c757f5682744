"""Submitted, not yet sliced, on the local stack (issue 43): a batch and a job exist from the moment their
manifest is accepted. The slicer is held (SIGSTOP) while the CLI submits with `--wait`, so the CLI reads
the batch (and the job) before any slicer record exists, every time, not by luck; then let go, both end
as they should. The job is a PNG named `picture.mp4` with `--output out.mp4`: it comes back as out.png."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from fleetctl.local.recording import OPERATOR_POLICY, role_env
from fleetctl.samples import astronaut, grace_hopper_path
from fusionfleet.media.sniff import image_format
from tests.e2e.conftest import ROOT, Stack
from tests.support.media import write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
HELD_S = 8.0  # how long the CLI waits on a PENDING batch before the slicer is let go


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pending-inputs")
    picture = cv2.resize(astronaut(), (160, 120), interpolation=cv2.INTER_AREA)
    for index, name in enumerate(("a.jpg", "b.png", "c.webp")):
        assert cv2.imwrite(str(folder / name), np.roll(picture, index * 5, axis=1))
    write_video(folder / "clip.mp4", seconds=2, fps=25, width=160, height=120)
    assert cv2.imwrite(str(folder / "picture.png"), picture)
    (folder / "picture.mp4").write_bytes((folder / "picture.png").read_bytes())  # a PNG, named as a video
    return folder


def submit_in_background(stack: Stack, log: Path, *args: str) -> subprocess.Popen[str]:
    """`fusionfleet submit … --wait` as the operator, its standard error (messages, progress) into `log`."""
    return subprocess.Popen(
        [sys.executable, "-m", "fleetctl.cli", "submit", "--source", str(grace_hopper_path()), "--engine", "copy",
         "--wait", "--timeout", "600", *args],
        env={**stack.env(), **role_env(OPERATOR_POLICY, "cli")}, cwd=ROOT, stdout=subprocess.PIPE,
        stderr=log.open("w"), text=True,
    )  # fmt: skip


def line_starting(log: Path, start: str, process: subprocess.Popen[str], timeout_s: float = 120) -> str:
    """The first line of the log that starts with `start`, once there (the CLI still running meanwhile)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [line for line in log.read_text().splitlines() if line.startswith(start)]
        if found:
            return found[0]
        assert process.poll() is None, f"the CLI ended ({process.returncode}) before {start!r}:\n{log.read_text()}"
        time.sleep(0.2)
    raise AssertionError(f"no {start!r} line after {timeout_s:.0f} s:\n{log.read_text()}")


def test_a_batch_and_a_job_submitted_with_wait_before_the_slicer_takes_them_succeed(
    stack: Stack, media: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    targets = [media / name for name in ("a.jpg", "b.png", "c.webp", "clip.mp4")]
    batch_log, job_log = tmp_path / "batch.log", tmp_path / "job.log"
    # GIVEN the slicer held: no manifest is taken while the CLI submits and starts waiting
    with stack.paused("slicer"):
        # WHEN a batch of mixed targets and a job are submitted with --wait
        batch_cli = submit_in_background(
            stack, batch_log, *[arg for path in targets for arg in ("--target", str(path))], "--name", "held-batch",
            "--output-dir", str(out),
        )  # fmt: skip
        job_cli = submit_in_background(
            stack, job_log, "--target", str(media / "picture.mp4"), "--name", "held-job",
            "--output", str(tmp_path / "out.mp4"),
        )  # fmt: skip
        batch = line_starting(batch_log, "batch ", batch_cli).split()[1].rstrip(":")
        job = line_starting(job_log, "job ", job_cli).split()[1]
        # THEN each wait reads its batch or job PENDING (not "no batch"), and keeps waiting while held
        assert line_starting(batch_log, "PENDING", batch_cli).endswith("0/4 items"), batch_log.read_text()
        line_starting(job_log, "PENDING", job_cli)
        time.sleep(HELD_S)
        assert batch_cli.poll() is None and job_cli.poll() is None, batch_log.read_text() + job_log.read_text()
        # AND `status` and `list` show them PENDING with what their manifests say
        status = stack.cli("status", batch)
        assert status.returncode == 0, status.stderr
        assert "PENDING" in status.stdout and all(path.name in status.stdout for path in targets), status.stdout
        job_status = stack.cli("status", job)
        assert job_status.returncode == 0 and "PENDING" in job_status.stdout, job_status.stderr
        assert "held-job" in job_status.stdout and "target.mp4" in job_status.stdout, job_status.stdout
        listed = stack.cli("list")
        assert all(f"{found} " in listed.stdout for found in (batch, job)), listed.stdout
        # AND an id nothing was submitted for is still unknown
        unknown = stack.cli("status", "never-submitted-0123456789abcdef")
        assert unknown.returncode != 0 and "no job" in unknown.stderr, unknown.stderr
    # WHEN the slicer is let go
    batch_stdout, _ = batch_cli.communicate(timeout=600)
    job_stdout, _ = job_cli.communicate(timeout=600)
    # THEN the batch succeeded and every item's output is in the folder
    assert batch_cli.returncode == 0, batch_log.read_text()
    assert batch_stdout.strip().splitlines()[-1] == batch
    assert sorted(path.name for path in out.iterdir()) == sorted(path.name for path in targets), batch_log.read_text()
    for name, kind in (("a.jpg", "jpeg"), ("b.png", "png"), ("c.webp", "webp")):
        assert image_format((out / name).read_bytes()[:64]) == kind, name
    assert (out / "clip.mp4").read_bytes()[4:8] == b"ftyp"
    # AND the job's picture came back under the name of what it is, said in one line
    assert job_cli.returncode == 0, job_log.read_text()
    assert job_stdout.strip().splitlines()[-1] == job
    assert not (tmp_path / "out.mp4").exists() and image_format((tmp_path / "out.png").read_bytes()[:64]) == "png"
    assert f"the output is a PNG picture: writing it to {tmp_path / 'out.png'}" in job_log.read_text()
