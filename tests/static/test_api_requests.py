"""Every request the AWS stage will make, validated against botocore's service models (issue 45).

The state machine: each Task's (and the Distributed Map's ItemReader's) parameters against the input
of the SDK call its integration makes. The template: each resource whose properties CloudFormation
hands to one API call (task definitions, launch template data, scaling targets and policies, alarms,
event source mappings...) against that call's input, for Stage=prod with the template's defaults.
Resource types that map to several calls, or under other names, are listed in UNMAPPED with why; a
type in neither list fails, so a new one is placed on purpose.

botocore's ParamValidator checks names, types, required members and minimums; it does not know
CloudFormation's own rules (cfn-lint's) nor what AWS accepts at run time (enum values, maximums).
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import pytest

from tests.support.api_shapes import (
    input_shape,
    operation,
    resolve,
    substituted_definition,
    task_request,
    to_request,
    validate,
)
from tests.support.cfn import Conditions, existing, parameter_values, transform

# What an AWS stage must be given (template Rules); the rest keep their defaults.
PROD_PARAMETERS = {
    "VpcId": "vpc-0123456789abcdef0",
    "SubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    "WorkerImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/fusionfleet-worker:1",
    "MergeImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/fusionfleet-merge:1",
    "ApiJwtIssuer": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_example",
    "ApiJwtAudience": "client-id",
}

# ---------------------------------------------------------------- the state machine

# Step Functions' integration service names that differ from botocore's.
SFN_SERVICES = {"sfn": "stepfunctions", "states": "stepfunctions", "cloudwatchlogs": "logs"}
# Optimized integrations that serialise a JSON object given for these members to a string.
JSON_STRING_MEMBERS = {("sqs", "SendMessage"): frozenset({"MessageBody"}), ("sns", "Publish"): frozenset({"Message"})}


def _definition() -> dict[str, Any]:
    return substituted_definition()


def integrations(node: Any, path: str = "") -> list[tuple[str, str, dict[str, Any]]]:
    """(where, resource ARN, parameters) of every Task state and ItemReader/ResultWriter, at any depth."""
    found: list[tuple[str, str, dict[str, Any]]] = []
    if isinstance(node, list):
        for index, item in enumerate(node):
            found += integrations(item, f"{path}[{index}]")
    elif isinstance(node, dict):
        resource = node.get("Resource")
        if isinstance(resource, str) and resource.startswith("arn:aws:states:::"):
            found.append((path, resource, dict(node.get("Parameters") or node.get("Arguments") or {})))
        for key, value in node.items():
            found += integrations(value, f"{path}/{key}")
    return found


def sdk_call(resource: str) -> tuple[str, str]:
    """(botocore service, operation) an integration ARN calls: …:::aws-sdk:ecs:describeServices and
    …:::sqs:sendMessage.waitForTaskToken alike."""
    call = resource.removeprefix("arn:aws:states:::").removeprefix("aws-sdk:").split(".")[0]
    service, api = call.split(":")
    return SFN_SERVICES.get(service, service), api[0].upper() + api[1:]


def asl_problems(definition: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    for where, resource, parameters in integrations(definition):
        service, name = sdk_call(resource)
        model = operation(service, name)
        found: list[str] = []
        strings = JSON_STRING_MEMBERS.get((service, name), frozenset())
        request = task_request(parameters, input_shape(model), where, found, strings)
        found += [f"{where}: {line}" for line in validate(request, model)]
        problems += [f"{service}:{name} {line}" for line in found]
    return problems


def test_every_integration_of_the_state_machine_is_a_request_botocore_would_send() -> None:
    # GIVEN every Task and ItemReader of the definition, as CloudFormation substitutes it
    definition = _definition()
    calls = {sdk_call(resource) for _, resource, _ in integrations(definition)}
    assert {("ecs", "DescribeServices"), ("ecs", "UpdateService"), ("s3", "PutObject"), ("s3", "GetObject")} <= calls
    # WHEN each one's parameters are checked against its SDK call's input shape
    # THEN botocore knows every name (in the SDK's PascalCase) and every required member is there
    assert asl_problems(definition) == []


def test_the_notice_claims_are_conditional_writes_s3_knows() -> None:
    # GIVEN the two claims of the final notice (a put that fails if the object exists)
    claims = [p for _, r, p in integrations(_definition()) if sdk_call(r) == ("s3", "PutObject")]
    assert len(claims) == 2 and all(p.get("IfNoneMatch") == "*" for p in claims)
    # THEN IfNoneMatch is a member of S3's PutObject in botocore's model (S3's conditional writes,
    # 2024): an SDK that lacks it would refuse the parameter, and the claim would not be conditional
    assert "IfNoneMatch" in input_shape(operation("s3", "PutObject")).members


@pytest.mark.parametrize(
    ("state", "remove", "add", "expected"),
    [
        ("ClaimSuccessNotice", ["IfNoneMatch"], {"IfNoneMatches": "*"}, "IfNoneMatches: not a parameter of PutObject"),
        ("WakeMerge", ["DesiredCount"], {"desiredCount": 1}, "the SDK's name is DesiredCount"),
        ("WakeMerge", ["DesiredCount"], {"DesiredCount": "one"}, "Invalid type for parameter desiredCount"),
        ("ReadMergeService", ["Services.$", "Cluster.$"], {}, "Missing required parameter"),
    ],
)
def test_a_wrong_name_type_or_missing_member_is_found(
    state: str, remove: list[str], add: dict[str, Any], expected: str
) -> None:
    # GIVEN the definition with one integration's parameters broken
    definition = _definition()
    parameters = _states(definition)[state]["Parameters"]
    for key in remove:
        parameters.pop(key)
    parameters.update(add)
    # WHEN it is checked THEN the problem is named
    problems = asl_problems(definition)
    assert any(expected in line for line in problems), problems


def _states(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for name, state in definition["States"].items():
        found[name] = state
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            found.update(_states(processor))
    return found


# ---------------------------------------------------------------- the template

# Resource type -> (service, operation, the shape its properties go to: None for the input itself).
MAPPED: dict[str, tuple[str, str, str | None]] = {
    "AWS::ECS::TaskDefinition": ("ecs", "RegisterTaskDefinition", None),
    "AWS::ECS::Service": ("ecs", "CreateService", None),
    "AWS::ECS::Cluster": ("ecs", "CreateCluster", None),
    "AWS::ECS::CapacityProvider": ("ecs", "CreateCapacityProvider", None),
    "AWS::ECS::ClusterCapacityProviderAssociations": ("ecs", "PutClusterCapacityProviders", None),
    "AWS::EC2::LaunchTemplate": ("ec2", "CreateLaunchTemplate", "LaunchTemplateData"),
    "AWS::AutoScaling::AutoScalingGroup": ("autoscaling", "CreateAutoScalingGroup", None),
    "AWS::ApplicationAutoScaling::ScalableTarget": ("application-autoscaling", "RegisterScalableTarget", None),
    "AWS::ApplicationAutoScaling::ScalingPolicy": ("application-autoscaling", "PutScalingPolicy", None),
    "AWS::CloudWatch::Alarm": ("cloudwatch", "PutMetricAlarm", None),
    "AWS::CloudWatch::Dashboard": ("cloudwatch", "PutDashboard", None),
    "AWS::Logs::MetricFilter": ("logs", "PutMetricFilter", None),
    "AWS::Lambda::EventSourceMapping": ("lambda", "CreateEventSourceMapping", None),
    "AWS::Lambda::Permission": ("lambda", "AddPermission", None),
    "AWS::KMS::Alias": ("kms", "CreateAlias", None),
    "AWS::ApiGatewayV2::Stage": ("apigatewayv2", "CreateStage", None),
    "AWS::CloudFront::OriginAccessControl": ("cloudfront", "CreateOriginAccessControl", None),
}
# Types whose properties CloudFormation spreads over several calls or renames: not checked here.
UNMAPPED = {
    "AWS::S3::Bucket": "a dozen PutBucket* calls, one per property",
    "AWS::S3::BucketPolicy": "PutBucketPolicy takes the policy as a string; cfn-lint and parliament check it",
    "AWS::SQS::Queue": "CreateQueue takes its properties as a string-to-string Attributes map",
    "AWS::SQS::QueuePolicy": "one policy set on several queues (SetQueueAttributes each)",
    "AWS::SNS::Topic": "CreateTopic takes its properties as an Attributes map",
    "AWS::SNS::Subscription": "Subscribe takes FilterPolicy and the rest as an Attributes map",
    "AWS::IAM::Role": "CreateRole, PutRolePolicy per policy, AttachRolePolicy (parliament checks the policies)",
    "AWS::IAM::ManagedPolicy": "CreatePolicy takes the document as a string, then AttachRolePolicy",
    "AWS::IAM::InstanceProfile": "CreateInstanceProfile, then AddRoleToInstanceProfile",
    "AWS::KMS::Key": "CreateKey, then EnableKeyRotation (KeyPolicy as a string)",
    "AWS::Logs::LogGroup": "CreateLogGroup, then PutRetentionPolicy",
    "AWS::Lambda::Function": "CreateFunction plus PutFunctionConcurrency and others; SAM writes it",
    "AWS::EC2::SecurityGroup": "CreateSecurityGroup (Description, not GroupDescription) and Authorize* calls",
    "AWS::Events::Rule": "PutRule, then PutTargets for its Targets",
    "AWS::StepFunctions::StateMachine": "the definition comes from S3 with substitutions (checked above)",
    "AWS::ApiGatewayV2::Api": "an OpenAPI Body SAM generates (ImportApi)",
    "AWS::CloudFront::Distribution": "CloudFront's API writes each list as {Quantity, Items}",
    "AWS::CloudFront::ResponseHeadersPolicy": "CloudFront's API writes each list as {Quantity, Items}",
}
# CloudFormation names that differ from the API's (more than by case).
RENAMED = {
    "AWS::ECS::Cluster": {"ClusterSettings": "settings"},
    "AWS::ECS::Service": {"PlacementStrategies": "placementStrategy", "PlacementConstraints": "placementConstraints"},
}
# Members CloudFormation generates for the call.
GENERATED = {"AWS::Lambda::Permission": {"StatementId": "generated-statement"}}


@cache
def _prod() -> tuple[dict[str, Any], dict[str, Any], Conditions]:
    template = transform("prod")
    values = parameter_values(template, "prod")
    values.update(PROD_PARAMETERS)
    # CloudFormation hands a template every parameter as a string (lists as lists of strings).
    values = {k: v if isinstance(v, list) else ("" if v is None else str(v)) for k, v in values.items()}
    for name, spec in template["Parameters"].items():
        if spec.get("Type") == "CommaDelimitedList" and isinstance(values[name], str):
            values[name] = values[name].split(",") if values[name] else [""]
    return template, values, Conditions(template, values)


def _generated_names(kind: str, name: str, properties: dict[str, Any]) -> dict[str, Any]:
    """What CloudFormation itself adds for the call: generated names, a scaling policy's target."""
    template, values, conditions = _prod()
    service, api, _ = MAPPED[kind]
    shape = input_shape(operation(service, api))
    for member in shape.required_members:
        if member.lower() not in {k.lower() for k in properties} and member.lower().endswith("name"):
            properties[member] = f"{name}-generated"
    for old, new in RENAMED.get(kind, {}).items():
        if old in properties:
            properties[new] = properties.pop(old)
    properties.update(GENERATED.get(kind, {}))
    if kind == "AWS::ApplicationAutoScaling::ScalingPolicy" and "ScalingTargetId" in properties:
        # resolved as "<LogicalId>": the scalable target's own three identifiers go in its place
        target = template["Resources"][properties.pop("ScalingTargetId").strip("<>")]["Properties"]
        for key in ("ServiceNamespace", "ResourceId", "ScalableDimension"):
            properties[key] = resolve(target[key], values, conditions, template.get("Mappings", {}))
    if kind == "AWS::AutoScaling::AutoScalingGroup" and isinstance(properties.get("VPCZoneIdentifier"), list):
        properties["VPCZoneIdentifier"] = ",".join(properties["VPCZoneIdentifier"])  # the API's one string
    return properties


def template_problems(template: dict[str, Any]) -> tuple[list[str], int]:
    """(problems, number of resources checked) for the transformed template's existing resources."""
    _, values, conditions = _prod()
    problems: list[str] = []
    checked = 0
    for name, resource in existing(template, conditions).items():
        kind = resource["Type"]
        if kind not in MAPPED:
            continue
        service, api, member = MAPPED[kind]
        model = operation(service, api)
        mappings = template.get("Mappings", {})
        resolved = resolve(copy.deepcopy(resource.get("Properties", {})), values, conditions, mappings)
        found: list[str] = []
        if member is None:
            properties = _generated_names(kind, name, resolved)
            request = to_request(properties, input_shape(model), name, found)
            found += validate(request, model)
        else:
            shape = input_shape(model).members[member]
            request = to_request(resolved[member], shape, f"{name}.{member}", found)
            found += validate({member: request, "LaunchTemplateName": "x"}, model)
        problems += [f"{kind} {name}: {line}" for line in found]
        checked += 1
    return problems, checked


def test_every_resource_type_is_checked_or_said_why_not() -> None:
    template, _, conditions = _prod()
    kinds = {resource["Type"] for resource in existing(template, conditions).values()}
    assert kinds - set(MAPPED) - set(UNMAPPED) == set()


def test_every_mapped_resource_is_a_request_botocore_would_send() -> None:
    # GIVEN the prod stage's transformed template, its parameters as CloudFormation passes them
    template, _, _ = _prod()
    # WHEN each mapped resource's properties are turned into its API call's request and validated
    problems, checked = template_problems(template)
    # THEN botocore finds nothing wrong in any of them
    assert checked >= 40  # 27 alarms, 4 scaling policies, 2 task definitions, the launch template...
    assert problems == []


@pytest.mark.parametrize(
    ("resource", "path", "value", "expected"),
    [
        ("RenderTaskDefinition", ("ContainerDefinitions", 0, "StopTimout"), 90, "StopTimout: not a member"),
        ("RenderTaskDefinition", ("ContainerDefinitions", 0, "StopTimeout"), "ninety", "'ninety' is not a integer"),
        ("GpuLaunchTemplate", ("LaunchTemplateData", "MetadataOptions", "HttpTokens"), ["required"], "takes a string"),
        ("MergeTaskDefinition", ("Family",), {"Ref": "AWS::NoValue"}, 'Missing required parameter in input: "family"'),
    ],
)
def test_a_misnamed_mistyped_or_missing_property_is_found(
    resource: str, path: tuple[str | int, ...], value: Any, expected: str
) -> None:
    # GIVEN the template with one property broken
    template = copy.deepcopy(_prod()[0])
    node: Any = template["Resources"][resource]["Properties"]
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    # WHEN it is checked THEN the problem is named
    problems, _ = template_problems(template)
    assert any(expected in line for line in problems), problems
