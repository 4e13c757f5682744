"""LocalStack's launcher memoises JSONPath parses: one parse per path, the same answers as before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER_DIR = ROOT / "infra" / "localstack"

# Run apart: memoising patches jsonpath_ng for the whole process, and moto uses it in this one.
PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
import jsonpath_ng, jsonpath_ng.ext
before = jsonpath_ng.ext.parse("$.job.priority")
import launch
launch.memoise_jsonpath()
from jsonpath_ng import parse as plain
from jsonpath_ng.ext import parse
assert parse("$.job.priority") is parse("$.job.priority")
assert plain("$.merge") is plain("$.merge")
# The same expression answers for each document it is given, and an update leaves it unchanged.
assert [m.value for m in parse("$.job.priority").find({"job": {"priority": "high"}})] == ["high"]
assert [m.value for m in parse("$.job.priority").find({"job": {"priority": "low"}})] == ["low"]
assert plain("$.merge").update_or_create({}, {"ok": 1}) == {"merge": {"ok": 1}}
assert plain("$.merge").update_or_create({"a": 2}, 3) == {"a": 2, "merge": 3}
assert str(parse("$.job.priority")) == str(before)
print("ok", jsonpath_ng.ext.parse.cache_info().hits)
"""


def test_memoised_jsonpath_parses_once_and_answers_as_before() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(LAUNCHER_DIR)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ") and int(done.stdout.split()[1]) >= 4
