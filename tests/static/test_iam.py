"""Least privilege, checked against the code: each component's role grants what its code calls, and no more
wildcard than an action requires.

The actions are derived, not listed: the adapters (`S3Storage`, `StepFunctions`, `SqsQueue`, `SnsNotifier`)
are read for the SDK calls each of their methods makes, and each component's code (every module its entry
point imports, transitively) for the adapter methods it calls. Components are found in the template itself:
every Lambda function by its handler, every ECS task role by the worker it runs. A function or a call added
later is held to the same rule.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.support.cfn import (
    PSEUDO_PARAMETERS,
    Conditions,
    Template,
    existing,
    parameter_values,
    references,
    statements,
    transform,
)

ROOT = Path(__file__).resolve().parents[2]
STAGE = "prod"
STACK = "fleet"
PACKAGES = ("fusionfleet", "functions", "gpu_worker")

# The adapter classes, the names the code gives the objects it calls them on, and the names each gives
# its boto3 clients with their IAM service prefix.
ADAPTERS = {
    "storage": ("fusionfleet/adapters/storage.py", "S3Storage", {"s3": "s3"}),
    "orchestrator": ("fusionfleet/adapters/orchestrator.py", "StepFunctions", {"sfn": "states", "client": "states"}),
    "queue": ("fusionfleet/adapters/queues.py", "SqsQueue", {"sqs": "sqs", "client": "sqs"}),
    "notifier": ("fusionfleet/adapters/notify.py", "SnsNotifier", {"sns": "sns", "client": "sns"}),
    "capacity": ("fusionfleet/fleet/quotas.py", "ServiceQuotasCapacity", {"quotas": "servicequotas", "ec2": "ec2"}),
    "waker": ("fusionfleet/fleet/wake.py", "EcsServiceWaker", {"ecs": "ecs"}),
    "retirement": ("gpu_worker/lifecycle/retirement.py", "EcsRetirement", {"_ecs": "ecs"}),
    "ordered": ("fusionfleet/adapters/ordered_queue.py", "SqsOrderedQueue", {"sqs": "sqs"}),
    "store": ("fusionfleet/adapters/secrets.py", "SecretsManagerStore", {"client": "secretsmanager"}),
}
# boto3 service names → the adapter class that alone is handed such a client in deployed code.
CLIENT_ADAPTERS = {
    "s3": {"S3Storage"},
    "stepfunctions": {"StepFunctions"},
    "sqs": {"SqsQueue", "SqsOrderedQueue"},
    "secretsmanager": {"SecretsManagerStore"},
    "sns": {"SnsNotifier"},
    "service-quotas": {"ServiceQuotasCapacity"},
    "ec2": {"ServiceQuotasCapacity"},
    "ecs": {"EcsServiceWaker", "EcsRetirement"},
}
# SDK calls whose IAM action is not their own name in CamelCase.
SDK_ACTIONS = {
    "s3:head_object": "s3:GetObject",
    "s3:download_file": "s3:GetObject",
    "s3:list_objects_v2": "s3:ListBucket",
    "s3:create_multipart_upload": "s3:PutObject",
    "s3:upload_part": "s3:PutObject",
    "s3:complete_multipart_upload": "s3:PutObject",
    "s3:delete_objects": "s3:DeleteObject",
    # A presigned GET is authorised as the signer's GetObject when it is used.
    "s3:generate_presigned_url": "s3:GetObject",
    # A presigned POST upload is authorised as the signer's PutObject (and PutObjectTagging, for the
    # retention tag its form carries) when it is used.
    "s3:generate_presigned_post": "s3:PutObject",
    "servicequotas:get_aws_default_service_quota": "servicequotas:GetAWSDefaultServiceQuota",
}
# Actions IAM has no resource type for: only these may be granted on "*".
RESOURCE_LESS = {
    "ecr:GetAuthorizationToken", "cloudwatch:PutMetricData", "xray:PutTraceSegments",
    # EC2 Describe* calls take no resource; the Service Quotas reads are listed without a resource type
    # in the Service Authorization Reference as far as could be checked here (not verified on AWS).
    "ec2:DescribeInstanceTypes", "servicequotas:GetServiceQuota", "servicequotas:GetAWSDefaultServiceQuota",
    # Task-token callbacks: no resource type; the token names the execution (test_iam_audit.py checks
    # every grant's resource type against parliament's copy of the Service Authorization Reference).
    "states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat",
    # The state machine's execution logging: CloudWatch Logs' vended-log delivery takes "*".
    "logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery", "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
}  # fmt: skip
CALLBACKS = {"states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"}
# AWS managed policies a role may carry (what Lambda, SQS event sources and ECS need to run).
MANAGED_POLICIES = {
    "AWSLambdaBasicExecutionRole",
    "AWSLambdaSQSQueueExecutionRole",
    "AmazonECSTaskExecutionRolePolicy",
    "AmazonEC2ContainerServiceforEC2Role",
    "AmazonSSMManagedInstanceCore",
}
# A worker image runs this module (gpu_worker/Dockerfile's ENTRYPOINT).
WORKER_ENTRY = "gpu_worker.__main__"


# ---------------------------------------------------------------- what the code calls


def _module_path(module: str) -> Path | None:
    for candidate in (ROOT / (module.replace(".", "/") + ".py"), ROOT / module.replace(".", "/") / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


@cache
def _imports(module: str) -> frozenset[str]:
    """Project modules `module` imports, directly (lazy imports inside functions included)."""
    path = _module_path(module)
    assert path, module
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        for name in names:
            parts = name.split(".")
            if parts[0] in PACKAGES:
                found |= {".".join(parts[:i]) for i in range(1, len(parts) + 1) if _module_path(".".join(parts[:i]))}
    return frozenset(found)


def closure(entry: str) -> set[str]:
    seen: set[str] = set()
    todo = [entry]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(_imports(module))
    return seen


def _receiver(call: ast.Call) -> tuple[str, str] | None:
    """(receiver name without leading underscores, method) of a call `x.y.method(...)`."""
    if not isinstance(call.func, ast.Attribute):
        return None
    value = call.func.value
    name = value.attr if isinstance(value, ast.Attribute) else value.id if isinstance(value, ast.Name) else None
    return (name.lstrip("_"), call.func.attr) if name else None


@cache
def adapter_actions(kind: str) -> dict[str, frozenset[str]]:
    """IAM actions of each public method of an adapter, from the SDK calls in its body (and its own helpers)."""
    path, class_name, clients = ADAPTERS[kind]
    tree = ast.parse((ROOT / path).read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    direct: dict[str, set[str]] = {}
    helpers: dict[str, set[str]] = {}
    for name, function in methods.items():
        direct[name], helpers[name] = set(), set()
        for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
            target = _receiver(call)
            if target is None:
                continue
            receiver, method = target
            if receiver == "self" and method in methods:
                helpers[name].add(method)
            elif receiver in clients:
                service = clients[receiver]
                if method == "get_paginator" and isinstance(call.args[0], ast.Constant):
                    method = str(call.args[0].value)
                direct[name].add(SDK_ACTIONS.get(f"{service}:{method}") or f"{service}:{_camel(method)}")

    def actions(name: str, seen: frozenset[str] = frozenset()) -> frozenset[str]:
        found = set(direct[name])
        for helper in helpers[name] - seen:
            found |= actions(helper, seen | {name})
        return frozenset(found)

    return {name: actions(name) for name in methods if not name.startswith("_")}


def _camel(method: str) -> str:
    return "".join(part.capitalize() for part in method.split("_"))


def component_actions(entry: str) -> set[str]:
    """IAM actions the code reachable from `entry` may need: every adapter method it calls."""
    needed: set[str] = set()
    for module in closure(entry):
        path = _module_path(module)
        assert path
        for call in (n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)):
            target = _receiver(call)
            if target and target[0] in ADAPTERS:
                needed |= adapter_actions(target[0]).get(target[1], frozenset())
    return needed


# ---------------------------------------------------------------- what the roles grant


@cache
def _aws() -> tuple[Template, Conditions]:
    template = transform(STAGE)
    return template, Conditions(template, parameter_values(template, STAGE))


def components() -> dict[str, str]:
    """Role logical id → the entry module of the code that runs with it, for every function and ECS task."""
    template, conditions = _aws()
    found: dict[str, str] = {}
    for resource in existing(template, conditions).values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::Lambda::Function":
            (role,) = set(references(props["Role"], conditions))
            found[role] = props["Handler"].rsplit(".", 1)[0]
        if resource["Type"] == "AWS::ECS::TaskDefinition":
            (role,) = set(references(props["TaskRoleArn"], conditions))
            found[role] = WORKER_ENTRY
    return found


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_statements(role: str) -> list[dict[str, Any]]:
    template, conditions = _aws()
    return list(statements(template["Resources"][role], conditions))


def granted(role: str) -> set[str]:
    actions: set[str] = set()
    for statement in role_statements(role):
        if statement["Effect"] == "Allow":
            actions |= {a.lower() for a in _listed(statement["Action"])}
    return actions


def grants(role: str, action: str) -> bool:
    return any(fnmatch.fnmatch(action.lower(), pattern) for pattern in granted(role))


_SUB = re.compile(r"\$\{([^}]+)\}")


def resolve(node: Any) -> str:
    """An ARN expression as a string: pseudo parameters filled in, other resources as <LogicalId>."""
    values = {**PSEUDO_PARAMETERS, "AWS::StackName": STACK}
    if isinstance(node, str):
        return node
    if "Fn::Sub" in node:
        text = node["Fn::Sub"] if isinstance(node["Fn::Sub"], str) else node["Fn::Sub"][0]
        return _SUB.sub(lambda m: values.get(m.group(1), f"<{m.group(1).split('.')[0]}>"), text)
    if "Ref" in node:
        return values.get(node["Ref"], f"<{node['Ref']}>")
    if "Fn::GetAtt" in node:
        target = node["Fn::GetAtt"]
        return f"<{target[0] if isinstance(target, list) else target.split('.')[0]}>"
    raise ValueError(f"cannot resolve {node}")


def test_components_are_found_in_the_template() -> None:
    found = components()
    assert {"SlicerFunctionRole", "DeadLetterFunctionRole", "WatchdogFunctionRole"} <= set(found)
    assert found["RenderTaskRole"] == found["MergeTaskRole"] == WORKER_ENTRY


def test_the_derivation_sees_the_calls_that_were_once_missing() -> None:
    # The slicer clears a stale rejection and workers clear checkpoints: both delete objects.
    assert "s3:DeleteObject" in adapter_actions("storage")["delete_prefix"]
    assert "s3:PutObject" in adapter_actions("storage")["upload_file"]
    assert "s3:DeleteObject" in component_actions("functions.slicer.app")
    assert "states:SendTaskFailure" in component_actions("functions.dlq.app")
    assert {"s3:DeleteObject", "sqs:ChangeMessageVisibility", "states:SendTaskHeartbeat"} <= component_actions(
        WORKER_ENTRY
    )


def client_uses() -> list[tuple[str, str, str | None]]:
    """(module, boto3 service, the class the new client is handed to) for every client the deployed code makes."""
    found: list[tuple[str, str, str | None]] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            handed: dict[int, str | None] = {}
            for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
                receiver = call.func.id if isinstance(call.func, ast.Name) else None
                for argument in (*call.args, *(k.value for k in call.keywords)):
                    handed[id(argument)] = receiver
            for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
                if isinstance(call.func, ast.Attribute) and call.func.attr == "client" and call.args:
                    service = call.args[0].value if isinstance(call.args[0], ast.Constant) else "<computed>"
                    found.append((str(path.relative_to(ROOT)), str(service), handed.get(id(call))))
    return found


def test_every_boto3_client_of_the_deployed_code_goes_to_an_adapter_the_derivation_reads() -> None:
    # GIVEN every `.client("<service>")` in the code that runs on AWS (not only the four adapters:
    # Service Quotas, EC2, and whatever is added later: ECS, CloudWatch, autoscaling)
    uses = client_uses()
    assert {service for _, service, _ in uses} >= {"s3", "stepfunctions", "service-quotas", "ec2"}
    # THEN each is handed straight to the adapter whose SDK calls are derived into IAM actions above,
    # so a call made through a client without an adapter here (and thus without a grant) fails
    stray = [
        (module, service, adapter)
        for module, service, adapter in uses
        if module != "fusionfleet/adapters/aws.py" and adapter not in CLIENT_ADAPTERS.get(service, set())
    ]
    assert stray == []
    adapted = {class_name for _, class_name, _ in ADAPTERS.values()}
    assert set().union(*CLIENT_ADAPTERS.values()) <= adapted


def test_the_quota_check_and_the_fleet_wake_are_derived_into_the_slicers_actions() -> None:
    assert component_actions("functions.slicer.app") >= {
        "servicequotas:GetServiceQuota", "servicequotas:GetAWSDefaultServiceQuota", "ec2:DescribeInstanceTypes",
        "ecs:DescribeServices", "ecs:UpdateService",
    }  # fmt: skip


def test_the_slicer_may_raise_the_render_service_and_no_other() -> None:
    (statement,) = [s for s in role_statements("SlicerFunctionRole") if "ecs:UpdateService" in _listed(s["Action"])]
    assert [resolve(r) for r in _listed(statement["Resource"])] == ["<RenderService>"]


# The derivation follows imports, so it sees every method of a shared class a component imports. The
# tenants' API imports the read model (fusionfleet.jobs.reader) and fusionfleet.services.operations for the
# methods checked below (the tenant page's reads, cancel and retry); the listing and Map Run calls of the
# others are the CLI's and the dashboard's.
UNUSED_REACHABLE: dict[str, set[str]] = {
    "ApiFunctionRole": {
        "states:DescribeMapRun", "states:GetExecutionHistory", "states:ListExecutions", "states:ListMapRuns",
    },
    # The loop's hand-back of a blocklisted render task (gpu_worker.delivery.loop): merges are never blocklisted.
    "MergeTaskRole": {"sqs:SendMessage"},
}  # fmt: skip
API_CALLS = {
    "reader": {"view", "detail_page", "attempts_page", "list_page", "indexed_jobs", "logs", "preview"},
    "operations": {"cancel", "retry"},
}


def test_the_api_uses_only_the_operations_its_role_is_granted_for() -> None:
    called: dict[str, set[str]] = {receiver: set() for receiver in API_CALLS}
    # The API's handler and the tenant service it serves (in the domain).
    paths = [*sorted((ROOT / "functions" / "api").glob("*.py")), ROOT / "fusionfleet" / "services" / "tenant_jobs.py"]
    for path in paths:
        for call in (n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)):
            target = _receiver(call)
            if target and target[0] in called:
                called[target[0]].add(target[1])
    assert called == API_CALLS


@pytest.mark.parametrize("role", sorted(components()))
def test_each_role_grants_every_action_its_code_calls(role: str) -> None:
    # GIVEN the code that runs with this role and the actions its adapter calls need
    needed = component_actions(components()[role]) - UNUSED_REACHABLE.get(role, set())
    assert needed
    # WHEN the role's statements are read
    # THEN each action is allowed (on some resource: the resources are checked below and in test_template)
    assert sorted(a for a in needed if not grants(role, a)) == []


def _inline_roles() -> list[str]:
    template, conditions = _aws()
    return sorted(n for n, r in existing(template, conditions).items() if r["Type"] == "AWS::IAM::Role")


@pytest.mark.parametrize("role", _inline_roles())
def test_no_role_grants_wildcard_actions_or_resources_beyond_what_an_action_requires(role: str) -> None:
    # GIVEN every Allow statement of the role
    problems: list[str] = []
    for statement in role_statements(role):
        actions = _listed(statement["Action"])
        resources = [resolve(r) for r in _listed(statement.get("Resource", []))]
        # THEN no action is a wildcard ("s3:*", "states:Send*")
        problems += [f"wildcard action {a}" for a in actions if "*" in a]
        # AND only actions IAM has no resource type for are granted on "*"
        if "*" in resources:
            problems += [f"{a} on *" for a in actions if a not in RESOURCE_LESS]
        # AND a wildcard inside an ARN stays within one of this stack's resources
        # ("*" alone was judged just above, by its actions)
        unscoped = [r for r in resources if r != "*" and "*" in r and "<" not in r and STACK not in r]
        problems += [f"{r} is not scoped to this stack" for r in unscoped]
    assert problems == []


@pytest.mark.parametrize("role", _inline_roles())
def test_managed_policies_are_only_the_runtime_ones(role: str) -> None:
    template, _ = _aws()
    arns = [resolve(a) for a in template["Resources"][role]["Properties"].get("ManagedPolicyArns", [])]
    assert {arn.rsplit("/", 1)[1] for arn in arns} <= MANAGED_POLICIES


def _callback_roles() -> list[str]:
    return [r for r in _inline_roles() if any(grants(r, f"states:SendTask{k}") for k in ("Success", "Failure"))]


@pytest.mark.parametrize("role", _callback_roles())
def test_task_token_callbacks_are_granted_on_any_token_and_nothing_else_rides_along(role: str) -> None:
    # GIVEN the statements that grant a role its task-token callbacks
    callbacks = [
        statement
        for statement in role_statements(role)
        if any(a.startswith("states:SendTask") for a in _listed(statement["Action"]))
    ]
    assert callbacks
    for statement in callbacks:
        # THEN they are granted on "*": the actions take no resource type (a grant on a state machine or
        # execution ARN never matches, and AWS denies every heartbeat and success)
        assert _listed(statement["Resource"]) == ["*"], role
        # AND such a statement grants nothing but the callbacks (the token is the capability)
        assert all(a in CALLBACKS for a in _listed(statement["Action"])), role


def test_the_state_machine_may_watch_its_map_children() -> None:
    # A Distributed Map's child executions are execution:<machine>/<map run>:<item>.
    allowed = [
        resolve(resource)
        for statement in role_statements("RenderStateMachineRole")
        if "states:DescribeExecution" in _listed(statement["Action"])
        for resource in _listed(statement["Resource"])
    ]
    child = f"arn:aws:states:us-east-1:123456789012:execution:{STACK}-render/0c9a7f2e-map:5d1e0b36"
    assert any(fnmatch.fnmatchcase(child, pattern) for pattern in allowed)


def test_whoever_publishes_to_an_encrypted_topic_may_use_its_key() -> None:
    # GIVEN the topics and the key each is encrypted with on AWS
    template, conditions = _aws()
    present = existing(template, conditions)
    keys = {
        name: set(references(r["Properties"]["KmsMasterKeyId"], conditions))
        for name, r in present.items()
        if r["Type"] == "AWS::SNS::Topic"
    }
    assert keys and all(len(k) == 1 for k in keys.values()), keys
    missing: list[str] = []
    for role in _inline_roles():
        for statement in role_statements(role):
            if statement["Effect"] != "Allow" or "sns:Publish" not in _listed(statement["Action"]):
                continue
            topics = set(references(statement["Resource"], conditions)) & set(keys)
            for topic in topics:
                (key,) = keys[topic]
                # THEN a publisher may also generate a data key with, and decrypt by, that key
                for action in ("kms:GenerateDataKey", "kms:Decrypt"):
                    if not any(
                        action in _listed(s["Action"]) and key in set(references(s["Resource"], conditions))
                        for s in role_statements(role)
                    ):
                        missing.append(f"{role}: {action} on {key} for {topic}")
    assert missing == []
    # AND the key lets CloudWatch alarms publish to the operators' topic
    alarm_topics = {
        ref
        for r in present.values()
        if r["Type"] == "AWS::CloudWatch::Alarm"
        for ref in references(r["Properties"].get("AlarmActions", []), conditions)
        if ref in keys
    }
    for topic in alarm_topics:
        (key,) = keys[topic]
        policy = present[key]["Properties"]["KeyPolicy"]["Statement"]
        assert any(
            s.get("Principal", {}).get("Service") == "cloudwatch.amazonaws.com"
            and {"kms:Decrypt", "kms:GenerateDataKey*"} <= set(_listed(s["Action"]))
            for s in policy
        ), topic


def test_whoever_reads_or_writes_media_may_use_the_media_key() -> None:
    # GIVEN the media bucket's key on AWS (SSE-KMS: every read needs kms:Decrypt, every write
    # kms:GenerateDataKey, by the caller's own role, presigned URLs included)
    template, conditions = _aws()
    (rule,) = template["Resources"]["MediaBucket"]["Properties"]["BucketEncryption"][
        "ServerSideEncryptionConfiguration"
    ]
    name, on_aws, _ = rule["Fn::If"]
    assert conditions[name]
    (key,) = set(references(on_aws["ServerSideEncryptionByDefault"]["KMSMasterKeyID"], conditions))
    missing: list[str] = []
    users = 0
    for role in _inline_roles():
        statements_ = [s for s in role_statements(role) if s["Effect"] == "Allow"]
        on_media = [s for s in statements_ if "MediaBucket" in set(references(s.get("Resource", []), conditions))]
        needs = {
            "kms:Decrypt": any("s3:GetObject" in _listed(s["Action"]) for s in on_media),
            "kms:GenerateDataKey": any("s3:PutObject" in _listed(s["Action"]) for s in on_media),
        }
        users += any(needs.values())
        for action, needed in needs.items():
            granted_ = any(
                action in _listed(s["Action"]) and key in set(references(s["Resource"], conditions))
                for s in statements_
            )
            if needed and not granted_:
                missing.append(f"{role}: {action} on {key}")
    # THEN every role that reads media may decrypt and every role that writes may generate data keys
    assert users >= 4  # slicer, render, merge, api
    assert missing == []
