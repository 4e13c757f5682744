"""A time budget for the whole pytest session, so a hung stack stops the run well inside CI's limit.

Per-test timeouts bound one test each; when LocalStack hangs, every remaining e2e test runs into
its own and they add up to hours. The budget bounds the session instead: each test gets at most
what is left of it as its timeout, and once it is spent the run stops with `pytest.exit`, naming
the reason and the test that was running.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass

import pytest

BUDGET_ENV = "FUSIONFLEET_SUITE_BUDGET_SECONDS"
# CI stops a job at 90 minutes and the whole suite takes about 25: an hour leaves room for a slow
# machine and still ends the run with its reason, and its teardown, before CI kills it blind.
DEFAULT_BUDGET_S = 3600.0
EXIT_CODE = pytest.ExitCode.INTERRUPTED  # the run was cut short: CI fails, and says why


def budget_from(environ: Mapping[str, str]) -> float | None:
    """The session budget in seconds; `0` turns the guard off. A bad value is an error, not a default."""
    raw = environ.get(BUDGET_ENV, "").strip()
    if not raw:
        return DEFAULT_BUDGET_S
    try:
        value = float(raw)
    except ValueError:
        raise pytest.UsageError(f"{BUDGET_ENV}={raw!r}: expected seconds (a number; 0 turns the guard off)") from None
    if value < 0:
        raise pytest.UsageError(f"{BUDGET_ENV}={raw!r}: expected seconds ≥ 0 (0 turns the guard off)")
    return value or None


def timeout_for(remaining_s: float, own_timeout_s: float | None) -> float:
    """The timeout one test runs under: its own, cut to what is left of the budget (at least a second)."""
    cut = max(1.0, remaining_s)
    return cut if own_timeout_s is None or own_timeout_s <= 0 else min(own_timeout_s, cut)


def stop_reason(budget_s: float, elapsed_s: float, nodeid: str) -> str | None:
    """Why the run stops after `nodeid`, or None while the budget lasts. Pure."""
    if elapsed_s < budget_s:
        return None
    return (
        f"suite budget spent: {elapsed_s:.0f} s of {budget_s:.0f} s ({BUDGET_ENV}) had passed when {nodeid} "
        "ended; stopping the run (a hung stack makes every remaining test wait out its own timeout)"
    )


@dataclass
class SuiteBudget:
    """The plugin: registered by tests/conftest.py."""

    budget_s: float
    clock: Callable[[], float] = time.monotonic
    started: float | None = None

    def elapsed(self) -> float:
        if self.started is None:
            self.started = self.clock()
        return self.clock() - self.started

    def pytest_sessionstart(self) -> None:
        self.started = self.clock()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        # Before pytest-timeout's wrapper reads the test's timeout: the closest marker wins.
        remaining = self.budget_s - self.elapsed()
        item.add_marker(pytest.mark.timeout(timeout_for(remaining, _own_timeout(item))), append=False)
        result = yield
        reason = stop_reason(self.budget_s, self.elapsed(), item.nodeid)
        if reason is not None:
            pytest.exit(reason, returncode=EXIT_CODE)
        return result


def _own_timeout(item: pytest.Item) -> float | None:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    option = item.config.getoption("timeout", None)
    if option is not None:
        return float(option)
    try:
        ini = item.config.getini("timeout")
    except ValueError:  # pytest-timeout not installed: no timeout of its own
        return None
    return float(ini) if ini not in (None, "") else None
