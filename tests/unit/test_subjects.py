"""Every SNS subject the Python code publishes is built by fusionfleet.adapters.notify, which keeps it within SNS's
100 characters (AWS refuses longer ones; LocalStack does not check). The state machine's own subjects are
checked in test_state_machine.py."""

from __future__ import annotations

import ast
from pathlib import Path

from fusionfleet.adapters.notify import SUBJECT_LIMIT, notice_subject
from fusionfleet.jobs.ids import JOB_ID_CHARS

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("fusionfleet", "fleetctl", "functions", "gpu_worker", "infra")
BUILDERS = {"notice_subject", "subject_line"}


def _subject_argument(call: ast.Call) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg in {"subject", "Subject"}:
            return keyword.value
    return call.args[1] if len(call.args) > 1 else None


def test_every_published_subject_is_built_within_the_limit() -> None:
    # GIVEN every call of a notifier's publish in the code
    offenders: list[str] = []
    calls = 0
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                receiver = ast.unparse(node.func.value).rsplit(".", 1)[-1].lstrip("_")
                if node.func.attr != "publish" or receiver != "notifier":
                    continue
                calls += 1
                subject = _subject_argument(node)
                # THEN its subject comes from one of the builders that bound its length
                built = (
                    isinstance(subject, ast.Call)
                    and isinstance(subject.func, ast.Name | ast.Attribute)
                    and ast.unparse(subject.func).rsplit(".", 1)[-1] in BUILDERS
                )
                if not built:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert calls >= 2  # the slicer's rejection, the final notice's topic channel
    assert offenders == []


def test_the_builder_fits_every_status_with_the_longest_job_id() -> None:
    job_id = "j" * JOB_ID_CHARS
    for status in ("succeeded", "failed", "cancelled", "timed_out"):
        assert len(notice_subject(job_id, status)) <= SUBJECT_LIMIT
