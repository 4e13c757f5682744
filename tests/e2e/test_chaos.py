"""A short chaos run on the test stack (`make chaos` runs the long one): nothing lost, nothing doubled."""

from __future__ import annotations

import pytest

from benchmarks.chaos import run_chaos
from benchmarks.chaos_model import ChaosConfig
from fleetctl.local.paths import LocalPaths
from fleetctl.local.processes import UpOptions
from tests.e2e.conftest import FAULT_ENV, ROOT, VISIBILITY_S, Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def test_a_short_chaos_run_loses_nothing(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in FAULT_ENV.items():
        monkeypatch.setenv(name, value)
    options = UpOptions(
        workers=2, port=stack.port, default_engine="copy", visibility_s=VISIBILITY_S, faults_file=stack.faults_file
    )
    paths = LocalPaths(root=ROOT, state_dir=stack.state_dir)
    report = run_chaos(
        paths, options, tmp_path_factory.mktemp("chaos"),
        ChaosConfig(jobs=8, bad_jobs=2, seconds=(3.0, 5.0), fault_interval_s=(1.5, 3.0), time_limit_s=400, seed=11),
    )  # fmt: skip
    assert report["faults_total"] >= 3, report
    assert report["lost"] == 0, report["problems"]
    assert report["duplicate_final_outputs"] == 0, report["problems"]
    assert report["outputs_differing_from_undisturbed"] == 0, report["problems"]
    assert report["failed_as_expected"] == 2, report["problems"]
    # Every good job succeeded: one that failed or never finished fails the test, named with its
    # reason in the report's problems (chaos alone must never cost a good job).
    assert report["failed_under_chaos"] == 0, report["problems"]
    assert report["still_running_at_the_end"] == 0, report["problems"]
    assert report["succeeded"] == 6, report["problems"]
    stack.set_faults([])
    stack.up()
