"""Runs parliament over IAM policies; executed by `.venv-parliament/bin/python`, never imported by the tests.

parliament lives in its own virtual environment (`make parliament-env`), like checkov, so this file
imports nothing of the project. It reads a JSON object `{name: policy document}` on stdin and writes
`[{"policy": name, "issue": ..., "detail": ...}]` on stdout: every finding of every policy.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from parliament import analyze_policy_string


def audit(policies: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for name, document in policies.items():
        policy = analyze_policy_string(json.dumps(document))
        found += [{"policy": name, "issue": f.issue, "detail": f.detail} for f in policy.findings]
    return found


if __name__ == "__main__":
    json.dump(audit(json.load(sys.stdin)), sys.stdout, default=str)
