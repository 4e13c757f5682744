"""The local stack keeps the dashboard's URL in its state and `local status` prints it."""

from __future__ import annotations

import json
from pathlib import Path

from fleetctl.cli import build_parser
from fleetctl.local.paths import LocalPaths
from fleetctl.local.state import LocalState, ManagedProcess
from fleetctl.local.supervisor import LocalStack

URL = "http://127.0.0.1:18080/"


def test_the_dashboard_url_survives_a_save_and_old_state_files_still_load(tmp_path: Path) -> None:
    # GIVEN a state with a dashboard WHEN saved and loaded THEN the URL is kept
    path = tmp_path / "state.json"
    state = LocalState(port=4566, region="us-east-1", stack="fusionfleet", dashboard_url=URL)
    state.processes.append(ManagedProcess("dashboard", "dashboard", 123, "dashboard.log"))
    state.save(path)
    loaded = LocalState.load(path)
    assert loaded is not None and loaded.dashboard_url == URL
    assert loaded.by_role("dashboard") == [ManagedProcess("dashboard", "dashboard", 123, "dashboard.log")]
    # AND a state file written before the dashboard existed loads without one
    path.write_text(json.dumps({"port": 4566, "region": "us-east-1", "stack": "fusionfleet"}))
    old = LocalState.load(path)
    assert old is not None and old.dashboard_url is None


def test_local_status_prints_the_dashboard_line(tmp_path: Path) -> None:
    # GIVEN a local stack's state with a dashboard (LocalStack itself not running)
    paths = LocalPaths(root=tmp_path, state_dir=tmp_path / "local")
    LocalState(port=4566, region="us-east-1", stack="fusionfleet", dashboard_url=URL).save(paths.state_file)
    # WHEN its status is printed THEN one line is exactly `dashboard <url>`
    lines = LocalStack(paths, say=lambda _line: None).status()
    assert f"dashboard {URL}" in lines
    # AND without a dashboard there is no such line
    LocalState(port=4566, region="us-east-1", stack="fusionfleet").save(paths.state_file)
    assert not [line for line in LocalStack(paths, say=lambda _line: None).status() if line.startswith("dashboard")]


def test_local_up_takes_a_dashboard_port() -> None:
    args = build_parser().parse_args(["local", "up", "--dashboard-port", "8123"])
    assert args.dashboard_port == 8123
    assert build_parser().parse_args(["local", "up"]).dashboard_port is None
