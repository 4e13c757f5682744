"""Every list of job states lives in `fusionfleet/jobs/`: the rest of the code names states through
`JobState` and asks the read model what a state means, and the pages render what they are given.

Python is read as written (its syntax tree): a tuple, list, set or dict that holds two or more job
state names as strings is a list of job states. The dashboards' scripts and pages may not name a job
state at all. Step Functions' own execution statuses (the same words, in its API) are the
orchestrator adapter's.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from fusionfleet.jobs.states import JobState

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("fusionfleet", "fleetctl", "functions", "gpu_worker", "infra", "benchmarks", "scripts")
OWNER = ROOT / "fusionfleet" / "jobs"
# Step Functions' execution statuses, in its API's words (fusionfleet.jobs.states maps them to job states).
EXEMPT = {ROOT / "fusionfleet" / "adapters" / "orchestrator.py"}
STATIC = ROOT / "fleetctl" / "dashboard" / "static"
NAMES = frozenset(state.value for state in JobState)
QUOTED = re.compile(
    r"""(["'`])(""" + "|".join(sorted(NAMES)) + r""")\1|>\s*(""" + "|".join(sorted(NAMES)) + r""")\s*<"""
)


def state_lists(source: str) -> list[int]:
    """The lines of `source` where a collection literal holds two or more job state names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        items: list[ast.expr | None] = []
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = list(node.elts)
        elif isinstance(node, ast.Dict):
            items = list(node.keys)
        else:
            continue
        named = [i for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str) and i.value in NAMES]
        if len(named) >= 2:
            found.append(node.lineno)
    return found


def sources() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if OWNER not in path.parents and path not in EXEMPT
    ]


def test_the_check_finds_a_list_of_job_states_however_it_is_written() -> None:
    assert state_lists('FINAL = ("SUCCEEDED", "FAILED")') == [1]
    assert state_lists('if state in {"RUNNING", "PENDING"}:\n    pass') == [1]
    assert state_lists('x = {"TIMED_OUT": "FAILED", "ABORTED": "FAILED"}') == [1]
    assert state_lists('if state == "RUNNING":\n    pass') == []  # one state named is not a list of them
    assert QUOTED.search('const RETRYABLE = new Set(["FAILED"]);') and QUOTED.search("<option>RUNNING</option>")


def test_no_python_outside_the_jobs_package_lists_job_states() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}" for path in sources() for line in state_lists(path.read_text())]
    assert len(sources()) > 100
    assert found == [], f"lists of job states outside fusionfleet/jobs/ (use fusionfleet.jobs.states): {found}"


def test_the_dashboards_pages_name_no_job_state() -> None:
    pages = sorted([*STATIC.glob("*.js"), *STATIC.glob("*.html")])
    assert pages
    found = [
        f"{page.relative_to(ROOT)}:{text[: match.start()].count(chr(10)) + 1}"
        for page in pages
        for text in [page.read_text()]
        for match in QUOTED.finditer(text)
    ]
    assert found == [], f"the pages name job states instead of rendering what they are given: {found}"
