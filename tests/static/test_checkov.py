"""checkov on template.yaml and the worker Dockerfile: every finding is fixed or accepted, with its reason,
in infra/checkov/accepted.yaml.

checkov runs from its own virtual environment (`make checkov-env`, which `make test` runs first): its
pins would fight the project's. Without that environment the test is skipped, saying how to create it.
"""

from __future__ import annotations

import json
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
ACCEPTED = ROOT / "infra" / "checkov" / "accepted.yaml"
SCANNED = ("template.yaml", "gpu_worker/Dockerfile")

Finding = tuple[str, str]  # (check id, resource)


def accepted() -> dict[Finding, str]:
    entries = yaml.safe_load(ACCEPTED.read_text())
    found: dict[Finding, str] = {}
    for entry in entries:
        assert set(entry) == {"check", "resource", "reason"}, entry
        assert str(entry["reason"]).strip(), entry
        key = (str(entry["check"]), str(entry["resource"]))
        assert key not in found, f"listed twice: {key}"
        found[key] = str(entry["reason"])
    return found


def findings(report: Any) -> set[Finding]:
    """Failed checks of a checkov JSON report (one framework's object, or a list of them)."""
    reports = report if isinstance(report, list) else [report]
    return {(f["check_id"], f["resource"]) for r in reports for f in r["results"]["failed_checks"]}


def review(found: set[Finding], allowed: dict[Finding, str]) -> tuple[list[Finding], list[Finding]]:
    """(new findings, accepted entries that no longer fire)."""
    return sorted(found - set(allowed)), sorted(set(allowed) - found)


@cache
def _run_checkov() -> set[Finding]:
    arguments = [str(CHECKOV), "--framework", "cloudformation", "dockerfile", "--compact", "--quiet", "-o", "json"]
    for path in SCANNED:
        arguments += ["-f", path]
    result = subprocess.run(arguments, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    # checkov exits 1 when any check fails; anything else, or no report, is a broken run.
    assert result.returncode in (0, 1), result.stderr[-2000:]
    return findings(json.loads(result.stdout))


def test_the_accepted_list_is_well_formed() -> None:
    assert len(accepted()) >= 1


def test_review_names_new_findings_and_stale_entries() -> None:
    allowed = {("CKV_AWS_18", "AWS::S3::Bucket.MediaBucket"): "reason", ("CKV_AWS_1", "X"): "reason"}
    found = {("CKV_AWS_18", "AWS::S3::Bucket.MediaBucket"), ("CKV_AWS_26", "AWS::SNS::Topic.NotificationTopic")}
    assert review(found, allowed) == ([("CKV_AWS_26", "AWS::SNS::Topic.NotificationTopic")], [("CKV_AWS_1", "X")])


@pytest.mark.skipif(not CHECKOV.exists(), reason="checkov's environment is missing: run `make checkov-env`")
def test_checkov_finds_nothing_that_is_not_accepted() -> None:
    # GIVEN checkov's report on the template and the Dockerfile
    found = _run_checkov()
    # WHEN it is compared with the accepted findings
    new, stale = review(found, accepted())
    # THEN there is no new finding, and no accepted entry that no longer fires (the list stays honest)
    assert new == [], "new checkov findings: fix them or accept them with a reason in infra/checkov/accepted.yaml"
    assert stale == [], "accepted findings that no longer fire: remove them from infra/checkov/accepted.yaml"
