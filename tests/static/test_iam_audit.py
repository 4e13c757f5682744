"""Every IAM policy of the stack, audited offline by parliament against AWS's service authorization data.

Neither LocalStack nor moto enforces IAM, so an action granted on a resource type it does not take (a
grant AWS never matches: the call is denied) passes every other test. parliament (its own virtual
environment, `make parliament-env`, like checkov) judges each Allow statement of every role and resource
policy of the SAM-transformed template, for each stage, with intrinsics resolved to ARNs of the shape AWS
gives each resource type. Each statement is split into one action on one resource, so a finding names
exactly the grant that is wrong.

Where parliament's data is known to lack a resource type AWS lists, the exception is below, with why.
"""

from __future__ import annotations

import json
import re
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.support.cfn import (
    PSEUDO_PARAMETERS,
    STAGES,
    Conditions,
    Template,
    existing,
    parameter_values,
    transform,
)

ROOT = Path(__file__).resolve().parents[2]
PARLIAMENT_PYTHON = ROOT / ".venv-parliament" / "bin" / "python"
RUNNER = ROOT / "tests" / "support" / "parliament_runner.py"
STACK = "fleet"
REGION, ACCOUNT = PSEUDO_PARAMETERS["AWS::Region"], PSEUDO_PARAMETERS["AWS::AccountId"]

# parliament 1.6.4's data lacks resource types that the Service Authorization Reference lists for these
# actions (ENVIRONMENT.md): (action, ARN pattern AWS accepts) → why it is right.
DATA_GAPS: dict[tuple[str, str], str] = {
    ("states:DescribeExecution", r"arn:aws:states:[^:]+:\d+:execution:.+"): (
        "DescribeExecution takes a standard execution ARN; parliament knows only the express form"
    ),
    ("states:ListExecutions", r"arn:aws:states:[^:]+:\d+:stateMachine:[^:]+"): (
        "ListExecutions lists a state machine's executions: its resource is the state machine"
    ),
}

# A key policy's Resource is "*" by definition: it means the key the policy is attached to.
STAR_IS_ITSELF = {"AWS::KMS::Key"}

_NO_VALUE = object()
_SUB = re.compile(r"\$\{(?!!)([^}]+)\}")
# Properties that set a resource's physical name.
NAME_PROPERTIES = ("Name", "StateMachineName", "BucketName", "QueueName", "TopicName", "FunctionName", "RoleName",
                   "LogGroupName", "ClusterName", "ServiceName")  # fmt: skip


# ---------------------------------------------------------------- ARNs for intrinsics


class Resolver:
    """Resolves Ref, Fn::GetAtt, Fn::Sub, Fn::Join and Fn::If to the strings AWS would put there."""

    def __init__(self, template: Template, conditions: Conditions, parameters: dict[str, Any]) -> None:
        self._resources: dict[str, Any] = template["Resources"]
        self._conditions = conditions
        self._values = {**parameters, "AWS::StackName": STACK}

    def __call__(self, node: Any) -> Any:
        if isinstance(node, list):
            return [v for v in (self(item) for item in node) if v is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if set(node) == {"Ref"}:
            return self._ref(node["Ref"])
        if set(node) == {"Fn::GetAtt"}:
            target = node["Fn::GetAtt"]
            name, attribute = target if isinstance(target, list) else target.split(".", 1)
            return self._attribute(name, attribute)
        if set(node) == {"Fn::If"}:
            name, when_true, when_false = node["Fn::If"]
            return self(when_true if self._conditions[name] else when_false)
        if set(node) == {"Fn::Join"}:
            separator, items = node["Fn::Join"]
            return separator.join(str(item) for item in self(items))
        if set(node) == {"Fn::Sub"}:
            value = node["Fn::Sub"]
            text, variables = (value, {}) if isinstance(value, str) else (value[0], self(value[1]))
            return _SUB.sub(lambda m: str(variables.get(m.group(1)) or self._name(m.group(1))), text)
        return {key: self(value) for key, value in node.items()}

    def _name(self, name: str) -> Any:
        base, _, attribute = name.partition(".")
        return self._attribute(base, attribute) if attribute else self._ref(base)

    def _ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name in self._values:
            return self._values[name]
        kind = self._resources[name]["Type"]
        physical = self._physical(name)
        refs = {
            "AWS::S3::Bucket": physical,
            "AWS::SQS::Queue": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{physical}",
            "AWS::SNS::Topic": f"arn:aws:sns:{REGION}:{ACCOUNT}:{physical}",
            "AWS::StepFunctions::StateMachine": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{physical}",
            "AWS::KMS::Key": "0c9a7f2e-1111-2222-3333-5d1e0b36aaaa",
            "AWS::ECS::Cluster": physical,
            "AWS::ECS::Service": f"arn:aws:ecs:{REGION}:{ACCOUNT}:service/{STACK}-cluster/{physical}",
            "AWS::Logs::LogGroup": physical,
            "AWS::Lambda::Function": physical,
            "AWS::IAM::Role": physical,
            "AWS::CloudFront::Distribution": "E2EXAMPLE1234",
            "AWS::AutoScaling::AutoScalingGroup": physical,
            "AWS::IAM::ManagedPolicy": f"arn:aws:iam::{ACCOUNT}:policy/{physical}",
        }
        assert kind in refs, f"the audit cannot resolve Ref of {kind} ({name}): add its form"
        return refs[kind]

    def _attribute(self, name: str, attribute: str) -> Any:
        kind = self._resources[name]["Type"]
        physical = self._physical(name)
        arns = {
            "AWS::S3::Bucket": f"arn:aws:s3:::{physical}",
            "AWS::SQS::Queue": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{physical}",
            "AWS::SNS::Topic": f"arn:aws:sns:{REGION}:{ACCOUNT}:{physical}",
            "AWS::StepFunctions::StateMachine": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{physical}",
            "AWS::KMS::Key": f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{self._ref(name)}",
            "AWS::ECS::Cluster": f"arn:aws:ecs:{REGION}:{ACCOUNT}:cluster/{physical}",
            "AWS::Logs::LogGroup": f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{physical}:*",
            "AWS::Lambda::Function": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{physical}",
            "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{physical}",
            "AWS::CloudFront::Distribution": f"arn:aws:cloudfront::{ACCOUNT}:distribution/{self._ref(name)}",
        }
        if attribute == "Arn" and kind in arns:
            return arns[kind]
        if attribute in {"Name", "QueueName", "TopicName"}:
            return physical
        if attribute.endswith("DomainName"):
            return f"{physical}.example.net"
        raise AssertionError(f"the audit cannot resolve {name}.{attribute} ({kind}): add its form")

    def _physical(self, name: str) -> str:
        """The resource's name: its own Name property where it sets one, else CloudFormation's kind."""
        props = self._resources[name].get("Properties", {})
        for key in NAME_PROPERTIES:
            if key in props:
                return str(self(props[key]))
        return f"{STACK}-{name.lower()}-1a2b3c"


# ---------------------------------------------------------------- the policies


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def policy_documents(template: Template, conditions: Conditions) -> dict[str, tuple[str, Any]]:
    """Every identity and resource policy that exists in this stage: '<resource>/<policy>' → (type, document)."""
    found: dict[str, tuple[str, Any]] = {}
    for name, resource in existing(template, conditions).items():
        props = resource.get("Properties", {})
        kind = resource["Type"]
        if kind == "AWS::IAM::Role":
            for index, entry in enumerate(props.get("Policies", [])):
                found[f"{name}/{index}"] = (kind, entry)
        elif kind in {"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"}:
            found[name] = (kind, props)
        elif kind in {"AWS::S3::BucketPolicy", "AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy"}:
            found[name] = (kind, {"PolicyDocument": props["PolicyDocument"]})
        elif kind == "AWS::KMS::Key":
            found[name] = (kind, {"PolicyDocument": props["KeyPolicy"]})
    return found


Grant = tuple[str, str, str, str]  # (policy, its resource type, action, resource)


def grants(stage: str) -> dict[str, tuple[Grant, dict[str, Any]]]:
    """Each Allow of one action on one resource, as a one-statement policy, keyed by a unique name."""
    template = transform(stage)
    conditions = Conditions(template, parameter_values(template, stage))
    resolve = Resolver(template, conditions, parameter_values(template, stage))
    found: dict[str, tuple[Grant, dict[str, Any]]] = {}
    for policy, (kind, entry) in policy_documents(template, conditions).items():
        document = resolve(entry)
        if document is _NO_VALUE:
            continue
        for index, statement in enumerate(document["PolicyDocument"]["Statement"]):
            assert "NotAction" not in statement and "NotResource" not in statement, (policy, statement)
            if statement["Effect"] != "Allow":
                continue
            where = f"{policy}/{statement.get('Sid', index)}"
            for action in _listed(statement["Action"]):
                for resource in _listed(statement["Resource"]):
                    single = {**statement, "Action": action, "Resource": resource}
                    found[f"{where} {action} {resource}"] = ((where, kind, action, resource), single)
    return found


def run_parliament(policies: dict[str, Any]) -> list[dict[str, Any]]:
    result = subprocess.run(
        [str(PARLIAMENT_PYTHON), str(RUNNER)],
        input=json.dumps(policies),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return list(json.loads(result.stdout))


def data_gap(action: str, resource: str) -> tuple[str, str] | None:
    """The DATA_GAPS entry that excuses this grant, if any."""
    return next(((a, p) for a, p in DATA_GAPS if action == a and re.fullmatch(p, resource)), None)


@cache
def _audit(stage: str) -> tuple[tuple[str, ...], frozenset[tuple[str, str]]]:
    """(parliament's findings on this stage's grants less the accepted ones, the data gaps that excused one)."""
    split = grants(stage)
    documents = {key: {"Version": "2012-10-17", "Statement": [single]} for key, (_, single) in split.items()}
    problems: list[str] = []
    excused: set[tuple[str, str]] = set()
    for finding in run_parliament(documents):
        (policy, kind, action, resource), _ = split[finding["policy"]]
        gap = data_gap(action, resource)
        if finding["issue"] == "RESOURCE_MISMATCH" and gap:
            excused.add(gap)
            continue
        if finding["issue"] == "RESOURCE_STAR" and kind in STAR_IS_ITSELF:
            continue
        problems.append(f"{finding['issue']}: {policy} {action} on {resource} ({finding['detail']})")
    return tuple(sorted(problems)), frozenset(excused)


needs_parliament = pytest.mark.skipif(
    not PARLIAMENT_PYTHON.exists(), reason="parliament's environment is missing: run `make parliament-env`"
)


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("stage", STAGES)
def test_every_policy_is_audited(stage: str) -> None:
    # GIVEN the stage's policies, split into single grants
    where = {policy.split("/")[0] for (policy, _, _, _), _ in grants(stage).values()}
    # THEN the roles and resource policies of that stage are all there
    expected = {"RenderStateMachineRole", "IngestQueuePolicy"}
    if stage == "prod":
        expected |= {"SlicerFunctionRole", "RenderTaskRole", "MergeTaskRole", "WatchdogFunctionRole", "NotificationKey"}
    assert expected <= where


def test_the_resolver_gives_each_resource_its_arn_shape() -> None:
    template = transform("prod")
    conditions = Conditions(template, parameter_values(template, "prod"))
    resolve = Resolver(template, conditions, parameter_values(template, "prod"))
    machine = resolve({"Ref": "RenderStateMachine"})
    assert machine == f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{STACK}-render"
    assert resolve({"Fn::Sub": "${MediaBucket.Arn}/*"}).startswith("arn:aws:s3:::fleet-mediabucket-")
    assert resolve({"Fn::GetAtt": ["RenderQueueHigh", "Arn"]}).startswith(f"arn:aws:sqs:{REGION}:{ACCOUNT}:")


@needs_parliament
def test_parliament_finds_an_action_on_the_wrong_resource_type() -> None:
    # GIVEN the grants this audit once found wrong: callbacks on a state machine, map runs on one
    wrong = {
        "callbacks": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": "states:SendTaskSuccess",
                    "Resource": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{STACK}-render",
                }
            ],
        },
        "map-runs": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": "states:ListMapRuns",
                    "Resource": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{STACK}-render",
                }
            ],
        },
    }
    # WHEN parliament audits them
    issues = {(f["policy"], f["issue"]) for f in run_parliament(wrong)}
    # THEN both are resource mismatches
    assert issues == {("callbacks", "RESOURCE_MISMATCH"), ("map-runs", "RESOURCE_MISMATCH")}


def test_the_data_gaps_are_narrow() -> None:
    execution = f"arn:aws:states:{REGION}:{ACCOUNT}:execution:{STACK}-render:job-1"
    machine = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{STACK}-render"
    assert data_gap("states:DescribeExecution", execution)
    assert data_gap("states:ListExecutions", machine)
    # An exception for one action and resource type excuses no other.
    assert not data_gap("states:DescribeExecution", machine)
    assert not data_gap("states:ListMapRuns", machine)


@needs_parliament
@pytest.mark.parametrize("stage", STAGES)
def test_no_policy_grants_an_action_on_a_resource_type_it_does_not_take(stage: str) -> None:
    # GIVEN every Allow of every policy in this stage, one action on one resource each
    # WHEN parliament judges them against AWS's service authorization data
    # THEN it finds nothing: no resource mismatch, unknown action, condition or malformed statement
    assert _audit(stage)[0] == ()


@needs_parliament
def test_every_data_gap_is_still_needed() -> None:
    # An exception that no longer excuses a finding (parliament's data caught up, or the grant went) is removed.
    used = set().union(*(_audit(stage)[1] for stage in STAGES))
    assert sorted(set(DATA_GAPS) - used) == []
