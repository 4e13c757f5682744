"""The whole-suite guard's decisions: when the run stops, what each test's timeout becomes, what the variable means."""

from __future__ import annotations

import pytest

from tests.support.suite_budget import BUDGET_ENV, DEFAULT_BUDGET_S, budget_from, stop_reason, timeout_for


def test_the_run_goes_on_while_the_budget_lasts() -> None:
    assert stop_reason(budget_s=3600, elapsed_s=3599.9, nodeid="tests/e2e/test_x.py::test_y") is None


def test_a_spent_budget_stops_the_run_naming_the_test_and_the_variable() -> None:
    reason = stop_reason(budget_s=3600, elapsed_s=3600, nodeid="tests/e2e/test_x.py::test_y")
    assert reason is not None
    assert "tests/e2e/test_x.py::test_y" in reason
    assert "3600 s of 3600 s" in reason
    assert BUDGET_ENV in reason


def test_a_test_runs_under_its_own_timeout_until_the_budget_is_shorter() -> None:
    assert timeout_for(remaining_s=3000, own_timeout_s=900) == 900
    assert timeout_for(remaining_s=120, own_timeout_s=900) == 120
    assert timeout_for(remaining_s=120, own_timeout_s=None) == 120
    # A disabled timeout (0) is still bounded by the budget.
    assert timeout_for(remaining_s=120, own_timeout_s=0) == 120


def test_a_test_started_with_the_budget_spent_still_gets_a_second_not_zero() -> None:
    # pytest-timeout reads 0 as "no timeout": a spent budget must not turn the limit off.
    assert timeout_for(remaining_s=-50, own_timeout_s=900) == 1.0


def test_the_budget_comes_from_the_environment_with_an_hour_by_default() -> None:
    assert budget_from({}) == DEFAULT_BUDGET_S == 3600
    assert budget_from({BUDGET_ENV: "1800"}) == 1800
    assert budget_from({BUDGET_ENV: "0"}) is None


@pytest.mark.parametrize("raw", ["soon", "-5", "1h"])
def test_a_bad_budget_is_a_usage_error_not_a_silent_default(raw: str) -> None:
    with pytest.raises(pytest.UsageError, match=BUDGET_ENV):
        budget_from({BUDGET_ENV: raw})
