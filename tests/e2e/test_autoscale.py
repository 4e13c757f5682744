"""Local autoscaling on a stack of its own: `local up --workers 1 --max-workers 3`. A job's backlog grows
the fleet to its maximum, the job's plan is sized to that fleet, an idle stack returns to one worker
(stopping only idle workers), and `local down` stops every autoscaled worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest

from fleetctl.local.state import LocalState
from fleetctl.stack import StackResources
from fusionfleet import layout
from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.storage import S3Storage, get_json
from fusionfleet.jobs.sizing import FleetView, engine_cost, sized_segment_count
from tests.e2e.conftest import ROOT, Stack, free_port
from tests.e2e.helpers import drop_job, notice_for, wait_until
from tests.support.media import write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def scaled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    state_dir = tmp_path_factory.mktemp("autoscaled-stack")
    port = free_port()
    command = [
        sys.executable, "-m", "fleetctl.cli", "local", "up", "--workers", "1", "--max-workers", "3",
        "--port", str(port), "--default-engine", "copy", "--state-dir", str(state_dir),
    ]  # fmt: skip
    up = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=400, check=False)
    state = LocalState.load(state_dir / "state.json")
    try:
        assert up.returncode == 0 and state is not None, f"{up.stdout}\n{up.stderr}"
        aws = AwsTarget(region=state.region, endpoint_url=state.endpoint)
        yield Stack(state_dir, state.endpoint, StackResources.from_outputs(state.outputs), aws, port)
    finally:
        subprocess.run(
            [sys.executable, "-m", "fleetctl.cli", "local", "down", "--state-dir", str(state_dir)],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip


def fleet(stack: Stack) -> dict[str, object]:
    try:
        record: dict[str, object] = json.loads((stack.state_dir / "autoscaler.json").read_text())
    except (OSError, ValueError):
        return {}
    return record


def test_a_backlog_grows_the_fleet_to_its_maximum_and_idleness_returns_it_to_the_minimum(
    scaled: Stack, tmp_path: Path
) -> None:
    # GIVEN an autoscaled stack at its minimum, one render worker
    assert wait_until(lambda: fleet(scaled).get("current") == 1, 60), fleet(scaled)
    status = scaled.cli("local", "status")
    assert "render workers: 1 current, 1 desired (autoscaled 1..3" in status.stdout, status.stdout
    inbox = scaled.subscribe()
    clip = write_video(tmp_path / "thirty.mp4", seconds=30, fps=25, width=320, height=240)
    # WHEN a 30 s job arrives
    # (the built-in engine, so its segments stay in work long enough to be a backlog: `copy` renders a
    # segment in about a second, and a loaded machine then never shows three at once)
    job = drop_job(scaled, "burst", clip, engine="classic", quality="realtime", priority="normal")
    # THEN the fleet grows to 3 workers within a minute
    assert wait_until(lambda: fleet(scaled).get("current") == 3, 60), (fleet(scaled), scaled.logs())
    # AND the job is planned for a fleet of 3, and succeeds
    assert notice_for(scaled, inbox, job, wait_s=300)["status"] == "succeeded"
    plan = get_json(S3Storage(scaled.client("s3")), scaled.resources.work_bucket, layout.plan_key(job))
    assert len(plan) == sized_segment_count(750, Fraction(25), engine_cost("classic"), FleetView(0, 3))
    # AND once idle the fleet returns to one worker (scale-in cooldown 30 s)
    assert wait_until(lambda: fleet(scaled).get("current") == 1 and not fleet(scaled).get("stopping"), 120), fleet(
        scaled
    )
    pids = [int(w["pid"]) for w in fleet(scaled)["workers"]]  # type: ignore[attr-defined]
    # AND `local down` stops the autoscaler and its workers
    down = scaled.cli("local", "down")
    assert down.returncode == 0, down.stderr
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
