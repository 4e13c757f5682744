"""Stage=prod through CloudFormation (issue 45 item 5): created, deleted and created again under the same
stack name, on LocalStack's CloudFormation in host mode (`make aws-check`; `make test` runs it too).

It is packaged as `sam package` would (fleetctl/local/deploy.py: the ASL and the Lambdas' code uploaded,
their paths rewritten) and LocalStack runs the SAM transform, the conditions, the Rules, the intrinsic
functions and the dependency order; it creates what it can (buckets, queues, topics, keys, roles and
their policies, Lambda functions, event source mappings, alarms, the state machine...). A resource type it
has no provider for (ECS, EC2 Auto Scaling, Application Auto Scaling, CloudFront, API Gateway v2, a launch
template...) it skips and reports created: the test prints which, from the stack's events and from
LocalStack's own list of providers. What this proves: the template deploys, deletes and redeploys as a
whole (names that must be unique per stack, dependencies, retained resources that would collide on a
redeploy); not that the skipped types would be accepted by AWS (test_api_requests.py checks those
requests against botocore's models).

LocalStack's stand-in for a skipped resource answers a Ref with "unknown", which IAM refuses as a policy
Resource; such references in policies are replaced by an ARN naming the resource (and printed).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from cfnlint.decode import cfn_yaml

from fleetctl.local import localstack
from fleetctl.local.deploy import package, wait_for_stack
from tests.e2e.conftest import ROOT, free_port

STACK = "fleet-prod-check"
REGION = "us-east-1"
# What the prod stage calls on top of the local stack's services (keys, the GPU AMI's SSM parameter,
# Lambda, the security group, alarms).
SERVICES = localstack.SERVICES + ",ssm,kms,lambda,ec2,cloudwatch"
PARAMETERS = {
    "Stage": "prod",
    "VpcId": "vpc-0123456789abcdef0",
    "SubnetIds": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
    "WorkerImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/fusionfleet-worker:1",
    "MergeImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/fusionfleet-merge:1",
    "ApiJwtIssuer": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_example",
    "ApiJwtAudience": "client-id",
}
FALLBACK = "is not supported but was deployed as a fallback"
# What the SAM transform turns the template's own serverless types into, before LocalStack sees them.
SAM_TYPES = {
    "AWS::Serverless::Function": "AWS::Lambda::Function",
    "AWS::Serverless::StateMachine": "AWS::StepFunctions::StateMachine",
    "AWS::Serverless::HttpApi": "AWS::ApiGatewayV2::Api",
}
LAUNCHER = ROOT / "infra" / "localstack" / "launch_create_only.py"
RECORD = ROOT / ".fusionfleet" / "aws-check" / "localstack-skipped.json"


def supported_types() -> set[str]:
    """The resource types LocalStack's CloudFormation has a provider for (its own plugin registry)."""
    done = subprocess.run(
        [str(ROOT / ".venv-localstack" / "bin" / "python"), "-c",
         "from importlib.metadata import entry_points; import json; "
         "print(json.dumps([e.name for e in entry_points(group='localstack.cloudformation.resource_providers')]))"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return set(json.loads(done.stdout))


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    port = free_port()
    folder = tmp_path_factory.mktemp("aws-check")
    env = {**os.environ, **localstack.localstack_env(port, folder / "volume"), "SERVICES": SERVICES}
    with (folder / "localstack.log").open("ab") as log:
        process = subprocess.Popen(
            [str(ROOT / ".venv-localstack" / "bin" / "python"), str(LAUNCHER)],
            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    try:
        localstack.wait_healthy(endpoint, 180, process)
        session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name=REGION)
        yield {name: session.client(name, endpoint_url=endpoint) for name in ("s3", "cloudformation")}
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # LocalStack has hung on SIGTERM before
            process.kill()
            process.wait(timeout=20)


def _statements(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, list):
        for item in node:
            yield from _statements(item)
    elif isinstance(node, dict):
        if isinstance(node.get("Statement"), list):
            yield from (s for s in node["Statement"] if isinstance(s, dict))
        for value in node.values():
            yield from _statements(value)


def for_localstack(text: str, supported: set[str]) -> tuple[str, list[str]]:
    """The packaged template with every policy Resource that names a skipped resource replaced by an
    ARN naming it (LocalStack's stand-in answers "unknown", which IAM refuses); and what was replaced."""
    template = json.loads(json.dumps(cfn_yaml.loads(text)))
    skipped = {
        name
        for name, r in template["Resources"].items()
        if SAM_TYPES.get(r["Type"], r["Type"]).lower() not in supported
    }
    replaced: list[str] = []

    def stand_in(value: Any) -> Any:
        target = value.get("Ref") if isinstance(value, dict) else None
        if isinstance(value, dict) and "Fn::GetAtt" in value:
            attribute = value["Fn::GetAtt"]
            target = attribute[0] if isinstance(attribute, list) else str(attribute).split(".")[0]
        if isinstance(target, str) and target in skipped:
            replaced.append(target)
            return {"Fn::Sub": f"arn:${{AWS::Partition}}:ecs:${{AWS::Region}}:${{AWS::AccountId}}:skipped/{target}"}
        return value

    for statement in _statements(template["Resources"]):
        resources = statement.get("Resource")
        if isinstance(resources, list):
            statement["Resource"] = [stand_in(r) for r in resources]
        elif resources is not None:
            statement["Resource"] = stand_in(resources)
    return json.dumps(template), sorted(set(replaced))


def create(cloudformation: Any, s3: Any, body: str) -> tuple[float, list[dict[str, Any]]]:
    """Create the stack from `body`, wait for it; (seconds, its resources)."""
    key = f"templates/{STACK}.json"
    s3.put_object(Bucket="fusionfleet-deployment", Key=key, Body=body.encode())
    started = time.monotonic()
    cloudformation.create_stack(
        StackName=STACK,
        TemplateURL=f"{s3.meta.endpoint_url}/fusionfleet-deployment/{key}",
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in PARAMETERS.items()],
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
    )
    wait_for_stack(cloudformation, STACK, timeout_s=600)
    resources = cloudformation.describe_stack_resources(StackName=STACK)["StackResources"]
    return time.monotonic() - started, resources


def delete(cloudformation: Any) -> float:
    started = time.monotonic()
    cloudformation.delete_stack(StackName=STACK)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        status = _status(cloudformation)
        if status == "DELETE_COMPLETE":
            return time.monotonic() - started
        assert status != "DELETE_FAILED", _failures(cloudformation)
        time.sleep(1)
    raise AssertionError(f"{STACK} was not deleted within 600 s")


def _status(cloudformation: Any) -> str:
    """The stack's status, DELETE_COMPLETE once it is gone: one call, since a stack can vanish between
    a call that finds it and the next (a run under load failed so, between an existence check and a read)."""
    try:
        stacks = cloudformation.describe_stacks(StackName=STACK)["Stacks"]
    except cloudformation.exceptions.ClientError:
        return "DELETE_COMPLETE"
    return str(stacks[0]["StackStatus"]) if stacks else "DELETE_COMPLETE"


def _failures(cloudformation: Any) -> list[str]:
    events = cloudformation.describe_stack_events(StackName=STACK)["StackEvents"]
    return [
        f"{e['LogicalResourceId']} {e['ResourceStatus']}: {e.get('ResourceStatusReason', '')}"
        for e in events
        if str(e.get("ResourceStatus", "")).endswith("FAILED")
    ]


def test_the_prod_stage_creates_deletes_and_creates_again_under_the_same_name(clients: dict[str, Any]) -> None:
    cloudformation, s3 = clients["cloudformation"], clients["s3"]
    supported = supported_types()
    # GIVEN the template packaged as `sam package` would, for LocalStack's stand-ins
    body, replaced = for_localstack(package(ROOT, ROOT / "template.yaml", s3), supported)
    timings: dict[str, float] = {}
    # WHEN the prod stage is created
    timings["create"], resources = create(cloudformation, s3, body)
    # THEN every resource is complete, not only the stack (LocalStack has reported a stack
    # CREATE_COMPLETE whose resources had failed)
    assert {
        r["LogicalResourceId"]: r["ResourceStatus"] for r in resources if r["ResourceStatus"] != "CREATE_COMPLETE"
    } == {}
    events = cloudformation.describe_stack_events(StackName=STACK)["StackEvents"]
    fallback = sorted({e["ResourceType"] for e in events if FALLBACK in (e.get("ResourceStatusReason") or "")})
    created = sorted({r["ResourceType"] for r in resources})
    without_provider = sorted(t for t in created if t.lower() not in supported)
    record = {
        "skipped_types": fallback, "types_without_a_provider": without_provider, "created_types": created,
        "resources": len(resources), "policy_resources_replaced": replaced,
    }  # fmt: skip
    print(json.dumps(record, indent=1))  # `make aws-check` shows it (-rP)
    # AND what LocalStack says it skipped is what it has no provider for
    assert fallback == without_provider
    assert {"AWS::Lambda::Function", "AWS::StepFunctions::StateMachine", "AWS::IAM::Role"} <= set(created) - set(
        fallback
    )
    retained = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources}["MediaBucket"]
    # WHEN it is deleted THEN the deletion completes, and the media bucket stays (DeletionPolicy: Retain)
    timings["delete"] = delete(cloudformation)
    s3.head_bucket(Bucket=retained)
    # WHEN it is created again under the same name THEN that completes as well (nothing retained or
    # named after the stack collides)
    timings["recreate"], again = create(cloudformation, s3, body)
    assert {
        r["LogicalResourceId"]: r["ResourceStatus"] for r in again if r["ResourceStatus"] != "CREATE_COMPLETE"
    } == {}
    assert len(again) == len(resources)
    timings["delete again"] = delete(cloudformation)
    record["seconds"] = {k: round(v, 1) for k, v in timings.items()}
    print(json.dumps(record["seconds"]))
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(json.dumps(record, indent=1) + "\n")
