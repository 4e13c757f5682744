"""Job and segment states are named in `fusionfleet/jobs/` alone: the rest of the code names them through
`JobState`, `SegmentState` and `NoticeStatus` and asks the read model what a state means, and the pages
render what they are given.

Python is read as written (its syntax tree): every string literal in the Python outside
`fusionfleet/jobs/` whose text is a state's word (`JobState`'s and `SegmentState`'s values, in any
case: "FAILED", "failed", "Done") is a state spelled a second time. The words come from
`fusionfleet.jobs.states`, not from a list here. Step Functions' own statuses (the same words in its
API) are the Step Functions adapter's; the few places where such a word is English or another thing's
state (a webhook delivery's, a process's, FaceFusion's) are allowed one by one below, each saying why.
The dashboards' scripts and pages may not name a job state at all.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from fusionfleet.jobs.states import JobState, SegmentState

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("fusionfleet", "functions", "gpu_worker", "fleetctl")
# The tools around the farm are held to the older, looser rule: no list of two or more job states.
TOOLS = ("infra", "benchmarks", "scripts")
OWNER = ROOT / "fusionfleet" / "jobs"
STATIC = ROOT / "fleetctl" / "dashboard" / "static"
NAMES = frozenset(state.value for state in JobState)
WORDS = frozenset(state.value.lower() for states in (JobState, SegmentState) for state in states)
QUOTED = re.compile(
    r"""(["'`])(""" + "|".join(sorted(NAMES)) + r""")\1|>\s*(""" + "|".join(sorted(NAMES)) + r""")\s*<"""
)

# The one Step Functions adapter speaks Step Functions' API: its execution statuses (RUNNING, SUCCEEDED,
# FAILED, TIMED_OUT, ABORTED) and its Map Run's item counts (succeeded, failed, running, pending,
# aborted) are AWS's words there, mapped to ours by fusionfleet.jobs.states.
AWS_WORDS = {ROOT / "fusionfleet" / "adapters" / "orchestrator.py"}

# (path, word): why that word, in that file, is not a job's or a segment's state. Each entry must
# still be used (a stale one fails), so the list only shrinks.
ALLOWED: dict[tuple[str, str], str] = {
    # Another thing's states that happen to share a word.
    ("fusionfleet/webhooks/records.py", "pending"): "a webhook delivery's state (pending, delivered, failed, skipped)",
    ("fusionfleet/webhooks/records.py", "failed"): "a webhook delivery's state (pending, delivered, failed, skipped)",
    ("fusionfleet/services/webhooks.py", "pending"): "a webhook delivery's state, not the job's",
    ("fusionfleet/services/webhooks.py", "failed"): "a webhook delivery's outcome and state, not the job's",
    ("fusionfleet/facefusion/job_file.py", "failed"): "FaceFusion's own job step statuses (its job_step_statuses)",
    ("fleetctl/local/localstack.py", "running"): "LocalStack's health answer for a running service",
    ("fleetctl/local/deploy.py", "FAILED"): "a CloudFormation stack status suffix (CREATE_FAILED, ...)",
    ("fleetctl/preflight/account.py", "rejected"): "a VPC endpoint's state, AWS's word",
    ("fleetctl/preflight/account.py", "failed"): "a VPC endpoint's state, AWS's word",
    ("gpu_worker/engines/facefusion/warm.py", "done"): "the warm FaceFusion child's reply to a finished request",
    ("gpu_worker/engines/facefusion/warm_segment.py", "done"): "the warm child's reply to a finished request",
    # English in what a person reads: field names and headings, not a state's value.
    ("fusionfleet/services/tenant_overview.py", "running"): "the tenant overview's field: its running jobs",
    ("fusionfleet/services/tenant_overview.py", "waiting"): "the tenant overview's field: its waiting jobs",
    ("functions/watchdog/app.py", "cancelled"): "the watchdog's log field: how many held jobs it cancelled",
    ("fleetctl/job_commands.py", "DONE"): "a column heading of `fusionfleet workers`: segments a worker finished",
    ("fleetctl/local/supervisor.py", "running"): "a local process's status line",
    ("fleetctl/local/supervisor.py", "waiting"): "a local worker's activity (no segment)",
    ("fleetctl/local/autoscaler.py", "waiting"): "the local autoscaler's count of queued messages",
    # A rejected job's final webhook event has its own stable id (`<job>.r0.failed.rejected`), as sent since
    # its first release: receivers deduplicate on it.
    ("fusionfleet/services/job_end.py", "rejected"): "part of a stable webhook-id",
    # What handling one manifest event did (the slicer's log line, its tests, a batch item's start): words of
    # the job's state, not yet its constants. To move when the outcome is typed (e.g. a StrEnum whose
    # WAITING and REJECTED are JobState's); left while batching.py was being edited beside this change.
    ("fusionfleet/services/slicing.py", "waiting"): "a slice outcome (SliceOutcome.status)",
    ("fusionfleet/services/slicing.py", "rejected"): "a slice outcome (SliceOutcome.status, an item's start)",
    ("fusionfleet/services/batching.py", "rejected"): "a batch item's start outcome (ItemStarter)",
}


def state_words(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal in `source` whose text is a job or segment state's word."""
    return [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in WORDS
    ]


def sources() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if OWNER not in path.parents and path not in AWS_WORDS
    ]


def found_words() -> Counter[tuple[str, str]]:
    """How often each (path, word) occurs outside the states' own package."""
    return Counter(
        (str(path.relative_to(ROOT)), text) for path in sources() for _line, text in state_words(path.read_text())
    )


def test_the_check_finds_a_state_word_however_it_is_written() -> None:
    assert state_words('if status == "RUNNING":\n    pass') == [(1, "RUNNING")]
    assert state_words('FINAL = ("succeeded", "failed")') == [(1, "succeeded"), (1, "failed")]
    assert state_words('counts = {"done": 0}') == [(1, "done")]
    assert state_words('orchestrator.list_executions(arn, "RUNNING")') == [(1, "RUNNING")]
    assert state_words('Kind = Literal["started", "cancelled"]') == [(1, "cancelled")]
    assert state_words('x = {"TIMED_OUT": "FAILED"}') == [(1, "TIMED_OUT"), (1, "FAILED")]
    assert state_words('def f(s: str = "Pending") -> None: ...') == [(1, "Pending")]
    # Prose that contains a word is not a state: only a literal that is the word alone.
    assert state_words('logger.info("job %s failed", job)\nx = f"{n} done"') == []
    assert state_words("x = JobState.RUNNING") == []
    assert QUOTED.search('const RETRYABLE = new Set(["FAILED"]);') and QUOTED.search("<option>RUNNING</option>")


def test_the_words_are_the_state_modules_own() -> None:
    assert {"running", "succeeded", "timed_out", "cancelled", "done", "pending"} <= WORDS


def test_no_python_outside_the_jobs_package_spells_a_state() -> None:
    assert len(sources()) > 100
    allowed = ALLOWED.keys()
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for path in sources()
        for line, text in state_words(path.read_text())
        if (str(path.relative_to(ROOT)), text) not in allowed
    ]
    assert found == [], f"state words outside fusionfleet/jobs/ (use fusionfleet.jobs.states' constants): {found}"


def test_every_allowance_is_still_needed() -> None:
    present = found_words()
    stale = [key for key in ALLOWED if key not in present]
    assert stale == [], f"allowances no longer needed (remove them): {stale}"


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


def test_the_tools_list_no_job_states() -> None:
    assert state_lists('FINAL = ("SUCCEEDED", "FAILED")') == [1]
    assert state_lists('if state == "RUNNING":\n    pass') == []
    paths = [path for package in TOOLS for path in sorted((ROOT / package).rglob("*.py"))]
    found = [f"{path.relative_to(ROOT)}:{line}" for path in paths for line in state_lists(path.read_text())]
    assert found == [], f"lists of job states in the tools (use fusionfleet.jobs.states): {found}"


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
