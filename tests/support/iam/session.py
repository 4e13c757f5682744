"""The e2e suite's IAM check: at the end of the session, every call its local stacks recorded is judged
(tests/support/iam/judge.py); a call AWS would deny fails the session with the judge's report."""

from __future__ import annotations

from pathlib import Path

import pytest

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
