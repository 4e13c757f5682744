"""The policies AWS would evaluate for the local stack's calls: each role's (and the operator policy's)
identity policies, the bucket and key policies, from the SAM-transformed template of an AWS stage with
every intrinsic resolved to the local stack's own names.

The local stack is the template deployed with Stage=local (its buckets, queues, topic and state machine
are real, by their physical names); what only an AWS stage creates (keys, the cluster, functions) gets a
name of the same shape. So a grant on `${WorkBucket.Arn}/work/*` is judged against the very bucket the
processes wrote to.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from tests.support.cfn import Conditions, Template, parameter_values, transform
from tests.support.iam.requests import ACCOUNT, PARTITION, queue_arn

AWS_STAGE = "prod"
STACK_UUID = "00000000-0000-0000-0000-000000000000"
_SUB = re.compile(r"\$\{(?!!)([^}]+)\}")
_NO_VALUE = object()

# AWS managed policies the stack's roles carry, as AWS publishes them (their documents at the versions
# SAM attaches; the IAM console and `aws iam get-policy-version` show them). A role with any other
# managed policy cannot be judged until it is added here.
_LOGS = ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"]
_SQS_SOURCE = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"]
MANAGED_POLICIES: dict[str, dict[str, Any]] = {
    "AWSLambdaBasicExecutionRole": {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": _LOGS, "Resource": "*"}],
    },
    "AWSLambdaSQSQueueExecutionRole": {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": [*_SQS_SOURCE, *_LOGS], "Resource": "*"}],
    },
}


@dataclass(frozen=True)
class Principal:
    name: str  # the logical id judged (a role, or the operator policy)
    arn: str
    policies: tuple[tuple[str, dict[str, Any]], ...]  # (name, document)
    # AWS managed policies whose documents the judge does not hold (roles no local process runs as).
    unknown: tuple[str, ...] = ()


@dataclass
class StackPolicies:
    """Everything the judge needs about one deployed local stack, resolved."""

    stack: str
    region: str
    principals: dict[str, Principal] = field(default_factory=dict)
    bucket_policies: dict[str, dict[str, Any]] = field(default_factory=dict)  # bucket name → policy
    key_policies: dict[str, dict[str, Any]] = field(default_factory=dict)  # key ARN → policy
    queue_policies: dict[str, dict[str, Any]] = field(default_factory=dict)  # queue ARN → policy
    bucket_keys: dict[str, str] = field(default_factory=dict)  # bucket name → KMS key ARN (SSE-KMS)
    topic_keys: dict[str, str] = field(default_factory=dict)  # topic ARN → KMS key ARN

    def resource_policy(self, resource: str) -> dict[str, Any] | None:
        if resource.startswith(f"arn:{PARTITION}:s3:::"):
            return self.bucket_policies.get(resource.split(":::", 1)[1].split("/", 1)[0])
        return self.key_policies.get(resource) or self.queue_policies.get(resource)


@cache
def _aws_template() -> Template:
    return transform(AWS_STAGE)


def stack_policies(description: Mapping[str, Any]) -> StackPolicies:
    """The policies of the AWS stage, resolved against a local stack `describe_stack` wrote."""
    template = _aws_template()
    parameters = parameter_values(template, AWS_STAGE)
    conditions = Conditions(template, parameters)
    region, stack = str(description["region"]), str(description["stack"])
    resolve = Resolver(template, conditions, parameters, stack, region, description["resources"])
    found = StackPolicies(stack, region)
    for name, resource in template["Resources"].items():
        if not conditions.holds(resource.get("Condition")):
            continue
        kind, properties = resource["Type"], resource.get("Properties", {})
        if kind == "AWS::IAM::Role":
            documents = [
                (str(entry["PolicyName"]), resolve(entry["PolicyDocument"]))
                for entry in resolve(properties.get("Policies", []))
            ]
            unknown = []
            for arn in resolve(properties.get("ManagedPolicyArns", [])):
                managed = _managed(str(arn), template, resolve)
                if managed is None:
                    unknown.append(str(arn))
                else:
                    documents.append(managed)
            role_arn = f"arn:{PARTITION}:iam::{ACCOUNT}:role/{stack}-{name}"
            found.principals[name] = Principal(name, role_arn, tuple(documents), tuple(unknown))
        elif kind == "AWS::IAM::ManagedPolicy":
            # A policy for people (the operator's): judged as a role that carries only it.
            role_arn = f"arn:{PARTITION}:iam::{ACCOUNT}:role/{stack}-operator"
            found.principals[name] = Principal(name, role_arn, ((name, resolve(properties["PolicyDocument"])),))
        elif kind == "AWS::S3::BucketPolicy":
            found.bucket_policies[str(resolve(properties["Bucket"]))] = resolve(properties["PolicyDocument"])
        elif kind == "AWS::KMS::Key":
            found.key_policies[str(resolve.attribute(name, "Arn"))] = resolve(properties["KeyPolicy"])
        elif kind == "AWS::SQS::QueuePolicy":
            for url in resolve(properties["Queues"]):
                found.queue_policies[queue_arn(str(url), region)] = resolve(properties["PolicyDocument"])
        elif kind == "AWS::S3::Bucket":
            for rule in properties.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", []):
                default = resolve(rule).get("ServerSideEncryptionByDefault", {})
                if default.get("SSEAlgorithm") == "aws:kms":
                    found.bucket_keys[str(resolve({"Ref": name}))] = str(default["KMSMasterKeyID"])
        elif kind == "AWS::SNS::Topic" and properties.get("KmsMasterKeyId"):
            key = resolve(properties["KmsMasterKeyId"])
            if key is not _NO_VALUE:
                found.topic_keys[str(resolve({"Ref": name}))] = _key_arn(str(key), region)
    return found


def _managed(arn: str, template: Template, resolve: Resolver) -> tuple[str, dict[str, Any]] | None:
    name = arn.rsplit("/", 1)[-1]
    if name in MANAGED_POLICIES:
        return name, MANAGED_POLICIES[name]
    for logical, resource in template["Resources"].items():
        if resource["Type"] == "AWS::IAM::ManagedPolicy" and str(resolve({"Ref": logical})) == arn:
            return logical, resolve(resource["Properties"]["PolicyDocument"])
    return None


def _key_arn(key: str, region: str) -> str:
    return key if key.startswith("arn:") else f"arn:{PARTITION}:kms:{region}:{ACCOUNT}:key/{key}"


class Resolver:
    """Ref, Fn::GetAtt, Fn::Sub, Fn::Join, Fn::If, Fn::Select and Fn::FindInMap, to the local stack's names."""

    def __init__(
        self, template: Template, conditions: Conditions, parameters: Mapping[str, Any], stack: str, region: str,
        deployed: Mapping[str, Mapping[str, str]],
    ) -> None:  # fmt: skip
        self._template = template
        self._conditions = conditions
        self._region = region
        self._stack = stack
        self._deployed = deployed
        self._values = {
            **parameters, "AWS::Region": region, "AWS::AccountId": ACCOUNT, "AWS::Partition": PARTITION,
            "AWS::StackName": stack, "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackId": f"arn:{PARTITION}:cloudformation:{region}:{ACCOUNT}:stack/{stack}/{STACK_UUID}",
        }  # fmt: skip

    def __call__(self, node: Any) -> Any:
        if isinstance(node, list):
            return [v for v in (self(item) for item in node) if v is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((function, argument),) = node.items()
            if function == "Ref":
                return self.ref(argument)
            if function == "Fn::GetAtt":
                name, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
                return self.attribute(name, attribute)
            if function == "Fn::If":
                name, when_true, when_false = argument
                return self(when_true if self._conditions[name] else when_false)
            if function == "Fn::Join":
                return str(argument[0]).join(str(item) for item in self(argument[1]))
            if function == "Fn::Select":
                return self(argument[1])[int(self(argument[0]))]
            if function == "Fn::FindInMap":
                mapping, top, second = self(argument)
                return self._template["Mappings"][mapping][top][second]
            if function == "Fn::Sub":
                text, variables = (argument, {}) if isinstance(argument, str) else (argument[0], self(argument[1]))
                return _SUB.sub(lambda m: str(variables.get(m.group(1)) or self._name(m.group(1))), text)
        resolved = {key: self(value) for key, value in node.items()}
        return {key: value for key, value in resolved.items() if value is not _NO_VALUE}

    def _name(self, name: str) -> Any:
        base, _, attribute = name.partition(".")
        return self.attribute(base, attribute) if attribute else self.ref(base)

    def _kind(self, name: str) -> str:
        return str(self._template["Resources"][name]["Type"])

    def _physical(self, name: str) -> str:
        deployed = self._deployed.get(name)
        return str(deployed["physical"]) if deployed else f"{self._stack}-{name}"

    def ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name in self._values:
            return self._values[name]
        kind, physical = self._kind(name), self._physical(name)
        prefix, region, local = f"arn:{PARTITION}", self._region, name in self._deployed
        refs = {
            "AWS::SQS::Queue": physical if local else f"https://sqs.{region}.amazonaws.com/{ACCOUNT}/{physical}",
            "AWS::SNS::Topic": physical if local else f"{prefix}:sns:{region}:{ACCOUNT}:{physical}",
            "AWS::StepFunctions::StateMachine": physical if local else
            f"{prefix}:states:{region}:{ACCOUNT}:stateMachine:{physical}",
            "AWS::KMS::Key": f"{self._stack}-{name}",
            "AWS::ECS::Service": f"{prefix}:ecs:{region}:{ACCOUNT}:service/{self._stack}-RenderCluster/{physical}",
            "AWS::IAM::ManagedPolicy": f"{prefix}:iam::{ACCOUNT}:policy/{physical}",
        }  # fmt: skip
        return refs.get(kind, physical)

    def attribute(self, name: str, attribute: str) -> Any:
        kind = self._kind(name)
        reference = str(self.ref(name))
        prefix, region = f"arn:{PARTITION}", self._region
        if attribute == "Arn":
            arns = {
                "AWS::S3::Bucket": f"{prefix}:s3:::{reference}",
                "AWS::SQS::Queue": queue_arn(reference, region) if "/" in reference else reference,
                "AWS::SNS::Topic": reference,
                "AWS::StepFunctions::StateMachine": reference,
                "AWS::KMS::Key": f"{prefix}:kms:{region}:{ACCOUNT}:key/{reference}",
                "AWS::ECS::Cluster": f"{prefix}:ecs:{region}:{ACCOUNT}:cluster/{reference}",
                "AWS::Logs::LogGroup": f"{prefix}:logs:{region}:{ACCOUNT}:log-group:{reference}:*",
                "AWS::Lambda::Function": f"{prefix}:lambda:{region}:{ACCOUNT}:function:{reference}",
                "AWS::IAM::Role": f"{prefix}:iam::{ACCOUNT}:role/{reference}",
                "AWS::IAM::InstanceProfile": f"{prefix}:iam::{ACCOUNT}:instance-profile/{reference}",
            }
            if kind not in arns:
                raise ValueError(f"the judge cannot resolve {name}.Arn ({kind}): add its form")
            return arns[kind]
        if attribute in {"QueueName", "TopicName"}:
            return reference.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        if attribute == "Name":
            return reference.rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        return f"{self._stack}-{name}-{attribute}"
