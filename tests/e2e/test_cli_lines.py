"""A FaceFusion user's command line on the local stack: `headless-run` replaced by `submit --wait` (given
a short --timeout, so it gives up first), then `wait` and `download` of the same job; and a job for an
engine the stack's workers do not run, refused at submit before anything is uploaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetctl.exits import Exit
from fleetctl.local.state import LocalState
from fleetctl.samples import grace_hopper_path
from tests.e2e.conftest import Stack
from tests.support.media import decode_all, write_video


def test_a_headless_run_line_runs_and_is_waited_for_and_downloaded_again(stack: Stack, tmp_path: Path) -> None:
    clip = write_video(tmp_path / "line.mp4", seconds=2, fps=25, width=320, height=240)
    out, again = tmp_path / "out.mp4", tmp_path / "again.mp4"
    # GIVEN FaceFusion's own flags, and a wait too short for the job
    given_up = stack.cli(
        "submit", "--wait", "-s", str(grace_hopper_path()), "-t", str(clip), "-o", str(out),
        "--processors", "face_swapper", "--face-selector-mode", "one", "--engine", "classic", "--timeout", "0.5",
    )  # fmt: skip
    # THEN submit gives up with its own status and says how to go on, the job going on
    assert given_up.returncode == Exit.GAVE_UP, given_up.stderr
    job = given_up.stdout.strip().splitlines()[-1]
    assert f"`fusionfleet wait {job}` goes on" in given_up.stderr and not out.exists()
    # WHEN it is waited for THEN its result is downloaded where -o says
    waited = stack.cli("wait", job, "-o", str(out), "--timeout", "300")
    assert waited.returncode == Exit.DONE, waited.stderr + stack.logs()
    assert len(decode_all(out)[1]) == 50
    # AND `download` fetches it again
    fetched = stack.cli("download", job, "-o", str(again))
    assert fetched.returncode == Exit.DONE, fetched.stderr
    assert again.read_bytes() == out.read_bytes()


def test_an_engine_no_local_worker_runs_is_refused_before_any_upload(stack: Stack, tmp_path: Path) -> None:
    state = LocalState.load(stack.state_dir / "state.json")
    assert state is not None and state.engines, "local up records what its workers run"
    if "facefusion" in state.engines:
        pytest.skip("this stack's workers were given FaceFusion")
    clip = write_video(tmp_path / "refused.mp4", seconds=1, fps=25, width=320, height=240)
    before = stack.client("s3").list_objects_v2(Bucket=stack.resources.media_bucket).get("KeyCount", 0)
    refused = stack.cli(
        "submit", "-s", str(grace_hopper_path()), "-t", str(clip), "--engine", "facefusion", "--name", "refused"
    )
    assert refused.returncode == Exit.REJECTED, refused.stderr
    assert "rejected: engine 'facefusion': no worker of the local stack runs it" in refused.stderr
    assert stack.client("s3").list_objects_v2(Bucket=stack.resources.media_bucket).get("KeyCount", 0) == before
