"""The e2e suite's IAM check: at the end of the session, every call its local stacks recorded is judged
(tests/support/iam/judge.py); a call AWS would deny fails the session with the judge's report."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from fusionfleet.environment.settings import FUSIONFLEET_IAM_RECORD_DIR
from tests.support.iam.judge import JudgeUnavailable, judge_folder


def judge_recorded_calls(session: pytest.Session, folder: Path) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")

    def say(line: str) -> None:
        if reporter is not None:
            reporter.write_line(line)
        else:
            print(line)

    if not any(folder.glob("calls-*.jsonl")):
        return  # no stack ran (the e2e tests were deselected)
    say("")
    say(f"IAM: every AWS call the local stacks made, judged against the template's roles ({folder})")
    try:
        verdict = judge_folder(folder)
    except JudgeUnavailable as error:
        say(f"IAM judge unavailable: {error}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return
    for line in verdict.report():
        say(line)
    if verdict.denials or verdict.unjudged:
        say("IAM: calls AWS would deny (above) fail the session")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def is_xdist_worker(config: pytest.Config) -> bool:
    """True in a pytest-xdist worker process (`make test` runs the suite in several side by side)."""
    return hasattr(config, "workerinput")


class IamRecording:
    """One recording folder for the whole run, judged once at its end.

    The controlling process names the folder before any test process starts (they inherit the variable), so
    the stacks of every process record into it; only that process judges, after every stack is down (the
    state machine's own calls are read back at `local down`)."""

    def __init__(self, config: pytest.Config) -> None:
        self.folder: Path | None = None
        if is_xdist_worker(config):
            return
        named = os.environ.get(FUSIONFLEET_IAM_RECORD_DIR)
        if not named:
            named = tempfile.mkdtemp(prefix="fusionfleet-iam-calls-")
            os.environ[FUSIONFLEET_IAM_RECORD_DIR] = named
        self.folder = Path(named)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.folder is not None:
            judge_recorded_calls(session, self.folder)
