"""The whole-suite guard in a real pytest run: past its budget the run stops with the reason, the test and teardown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.suite_budget import BUDGET_ENV

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = """
import os
import pytest
from tests.support.suite_budget import SuiteBudget, budget_from

def pytest_configure(config):
    budget = budget_from(os.environ)
    if budget is not None:
        config.pluginmanager.register(SuiteBudget(budget), "suite-budget")

@pytest.fixture(scope="session")
def stack():
    yield "stack"
    print("SESSION TEARDOWN RAN")
"""

TESTS = """
import time

def test_first(stack):
    time.sleep(0.2)

def test_hangs(stack):
    time.sleep(60)  # a stack that stopped answering: far past what is left of the budget

def test_never_started(stack):
    pass
"""


def run_suite(tmp_path: Path, budget_s: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_inner.py").write_text(TESTS)
    env = {**os.environ, BUDGET_ENV: budget_s, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "-q", "--rootdir", str(tmp_path),
         "-o", "timeout=900", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_hung_test_is_cut_at_the_budget_and_the_run_stops_naming_it(tmp_path: Path) -> None:
    # GIVEN a 3 s budget and a test that would hang for a minute (its own timeout: 900 s)
    result = run_suite(tmp_path, "3")
    output = result.stdout + result.stderr
    # THEN the hung test failed on the budget's timeout, the run stopped with the reason naming it
    assert result.returncode == 2, output
    assert "suite budget spent" in output, output
    assert "test_inner.py::test_hangs" in output, output
    # ... the next test never started, and the session's fixtures were torn down
    assert "test_never_started" not in output.split("suite budget spent")[0].split("test_hangs")[-1], output
    assert "1 failed" in output and "1 passed" in output, output
    assert "SESSION TEARDOWN RAN" in output, output


def test_a_run_inside_its_budget_is_untouched(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_inner.py").write_text("def test_quick(stack):\n    pass\n")
    env = {**os.environ, BUDGET_ENV: "600", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "suite budget spent" not in result.stdout
