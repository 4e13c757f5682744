"""The IAM judge: every recorded call of the local stack, evaluated as AWS would evaluate it.

Each call (a JSON line written by a process of the local stack, or read back from the state machine's
executions) becomes the IAM requests AWS evaluates for it (`requests.py`), which are evaluated with
@cloud-copilot/iam-simulate (infra/iam/evaluate.mjs; `make iam-env` installs it) against the policies of
the SAM-transformed template of an AWS stage, resolved to the local stack's names (`policies.py`): the
caller's role, and the bucket, key and queue policies. A denial names the process, the call, the
request AWS would refuse, and the statements of the role that grant the action (on other resources),
so what is missing is plain. Requests are deduplicated before they are evaluated.

Run on a folder of recordings: python -m tests.support.iam.judge FOLDER (prints `N calls, M denied`
last; exit 1 when any call is denied or cannot be judged).
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.iam.policies import Principal, StackPolicies, stack_policies
from tests.support.iam.requests import ACCOUNT, Call, IamRequest, UnknownCall, kms_requests, requests_of

ROOT = Path(__file__).resolve().parents[3]
EVALUATOR = ROOT / "infra" / "iam" / "evaluate.mjs"
NODE_MODULES = ROOT / "infra" / "iam" / "node_modules" / "@cloud-copilot" / "iam-simulate"
ALLOWED = "Allowed"


class JudgeUnavailable(RuntimeError):
    """Node or the evaluator's package is missing: `make iam-env` installs it."""


@dataclass(frozen=True)
class Denial:
    call: Call
    request: IamRequest
    decision: str  # ImplicitlyDenied, ExplicitlyDenied, or Error (a request AWS would refuse as malformed)
    detail: str

    def describe(self) -> str:
        return (
            f"{self.call.process} (as {self.call.role}): {self.call.describe()} → {self.request.action} on "
            f"{self.request.resource}: {self.decision}. {self.detail}"
        )


@dataclass
class Verdict:
    calls: int = 0
    requests: int = 0
    denials: list[Denial] = field(default_factory=list)
    unjudged: list[str] = field(default_factory=list)  # calls no stack or mapping could place
    by_role: Counter[str] = field(default_factory=Counter)
    processes: dict[str, set[str]] = field(default_factory=dict)

    @property
    def denied_calls(self) -> int:
        return len({id(denial.call) for denial in self.denials})

    def report(self) -> list[str]:
        lines = [f"{'ROLE':<26} {'CALLS':>8}  PROCESSES"]
        for role, count in sorted(self.by_role.items()):
            lines.append(f"{role:<26} {count:>8}  {', '.join(sorted(self.processes[role]))}")
        lines += [f"DENIED  {denial.describe()}" for denial in self.denials[:50]]
        if len(self.denials) > 50:
            lines.append(f"… and {len(self.denials) - 50} more denials")
        lines += [f"UNJUDGED  {why}" for why in self.unjudged[:50]]
        lines.append(f"{self.calls} calls, {self.denied_calls + len(self.unjudged)} denied")
        return lines


# ---------------------------------------------------------------- reading recordings


@dataclass(frozen=True)
class RecordedStack:
    endpoint: str
    started: float
    stopped: float | None
    policies: StackPolicies

    def covers(self, call: Call) -> bool:
        return call.endpoint == self.endpoint and self.started - 5 <= call.t <= (self.stopped or float("inf")) + 5


def read_stacks(folder: Path) -> list[RecordedStack]:
    stacks = []
    for path in sorted(folder.glob("stack-*.json")):
        description = json.loads(path.read_text())
        stacks.append(
            RecordedStack(
                str(description["endpoint"]), float(description["started"]), description.get("stopped"),
                stack_policies(description),
            )
        )  # fmt: skip
    return stacks


def read_calls(folder: Path) -> Iterator[Call]:
    for path in sorted(folder.glob("calls-*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    yield Call.from_line(json.loads(line))


# ---------------------------------------------------------------- judging


def judge(calls: Iterable[Call], stacks: list[RecordedStack]) -> Verdict:
    verdict = Verdict()
    pending: dict[tuple[str, str, IamRequest, str | None], list[Call]] = {}
    places: dict[str, tuple[RecordedStack, Principal]] = {}
    for call in calls:
        verdict.calls += 1
        verdict.by_role[call.role] += 1
        verdict.processes.setdefault(call.role, set()).add(_kind(call.process))
        stack = next((s for s in reversed(stacks) if s.covers(call)), None)
        if stack is None:
            verdict.unjudged.append(f"{call.process}: {call.describe()}: no recorded stack at {call.endpoint}")
            continue
        principal = stack.policies.principals.get(call.role)
        if principal is None or principal.unknown:
            why = f"the template has no role {call.role}" if principal is None else (
                f"{call.role} carries managed policies the judge has no document of ({', '.join(principal.unknown)}): "
                "add them to tests/support/iam/policies.py"
            )  # fmt: skip
            verdict.unjudged.append(f"{call.process}: {call.describe()}: {why}")
            continue
        try:
            wanted = requests_of(call) + kms_requests(call, stack.policies.bucket_keys, stack.policies.topic_keys)
        except UnknownCall as error:
            verdict.unjudged.append(f"{call.process}: {error}")
            continue
        place = f"{id(stack)}:{call.role}"
        places[place] = (stack, principal)
        for request in wanted:
            pending.setdefault((place, call.region, request, None), []).append(call)
    keys = list(pending)
    verdict.requests = len(keys)
    decisions = _evaluate(keys, places)
    for key, (decision, detail) in zip(keys, decisions, strict=True):
        if decision != ALLOWED:
            stack, principal = places[key[0]]
            first = pending[key][0]
            hint = detail or _missing(principal, key[2])
            verdict.denials.append(Denial(first, key[2], decision, hint))
            for other in pending[key][1:]:
                verdict.denials.append(Denial(other, key[2], decision, hint))
    return verdict


def _kind(process: str) -> str:
    """worker-3 → worker: the report groups processes by kind."""
    head, _, tail = process.rpartition("-")
    return head if head and tail.isdigit() else process


def _missing(principal: Principal, request: IamRequest) -> str:
    """What the role grants for the action, so the missing statement is plain."""
    granting = []
    for _name, document in principal.policies:
        for statement in _statements(document):
            actions = statement.get("Action", [])
            actions = [actions] if isinstance(actions, str) else actions
            if statement.get("Effect") == "Allow" and any(
                fnmatch.fnmatchcase(request.action.lower(), a.lower()) for a in actions
            ):
                resources = statement.get("Resource", [])
                resources = [resources] if isinstance(resources, str) else resources
                granting.append(f"{statement.get('Sid', '(no Sid)')} on {', '.join(map(str, resources))}")
    if not granting:
        return f"missing: a statement of {principal.name} allowing {request.action} (it has none)"
    return (
        f"missing: a statement of {principal.name} allowing {request.action} on {request.resource}; "
        f"it allows {request.action} only by " + "; ".join(granting)
    )


def _statements(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    statements = document.get("Statement", [])
    return [statements] if isinstance(statements, Mapping) else list(statements)


def _evaluate(
    keys: list[tuple[str, str, IamRequest, str | None]], places: Mapping[str, tuple[RecordedStack, Principal]]
) -> list[tuple[str, str]]:
    if not keys:
        return []
    ensure_evaluator()
    principals: dict[str, Any] = {}
    resource_policies: dict[str, Any] = {}
    requests = []
    for place, region, request, _ in keys:
        stack, principal = places[place]
        principals.setdefault(place, {"arn": principal.arn, "policies": [
            {"name": name, "policy": document} for name, document in principal.policies]})  # fmt: skip
        policy = stack.policies.resource_policy(request.resource)
        policy_key = None
        if policy is not None:
            policy_key = f"{id(stack)}:{_resource_owner(request.resource)}"
            resource_policies.setdefault(policy_key, policy)
        context = {
            "aws:SecureTransport": "true",  # AWS's endpoints are HTTPS; the buckets deny anything else
            "aws:RequestedRegion": region,
            "aws:PrincipalArn": principal.arn,
            "aws:PrincipalAccount": ACCOUNT,
            **request.context_dict(),
        }
        requests.append({
            "principal": place, "action": request.action, "resource": request.resource, "account": ACCOUNT,
            "context": context, "resource_policy": policy_key,
        })  # fmt: skip
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as batch:
        json.dump({"principals": principals, "resource_policies": resource_policies, "requests": requests}, batch)
    try:
        done = subprocess.run(
            ["node", str(EVALUATOR), batch.name], capture_output=True, text=True, check=False, cwd=EVALUATOR.parent
        )
    finally:
        Path(batch.name).unlink(missing_ok=True)
    if done.returncode != 0:
        raise RuntimeError(f"the IAM evaluator failed ({done.returncode}): {done.stderr[-2000:]}")
    return [(str(r["decision"]), str(r["errors"] or "")) for r in json.loads(done.stdout)]


def _resource_owner(resource: str) -> str:
    """The bucket of an object ARN, or the resource itself (whose policy applies)."""
    return resource.split("/", 1)[0] if ":s3:::" in resource else resource


def ensure_evaluator() -> None:
    if not NODE_MODULES.is_dir():
        raise JudgeUnavailable(
            f"the IAM evaluator's package is not installed ({NODE_MODULES}): run make iam-env "
            "(npm ci in infra/iam; Node 20 or newer)"
        )


def judge_folder(folder: Path) -> Verdict:
    return judge(read_calls(folder), read_stacks(folder))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.support.iam.judge FOLDER", file=sys.stderr)
        return 2
    verdict = judge_folder(Path(argv[0]))
    for line in verdict.report():
        print(line)
    return 1 if verdict.denials or verdict.unjudged or verdict.calls == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
