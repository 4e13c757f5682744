"""A recorded AWS call as the IAM requests AWS evaluates for it: action, resource ARN, context keys. Pure.

One call may be several requests: DeleteObjects is one s3:DeleteObject per key, CopyObject reads one
object and writes another, a PUT with tags is s3:PutObject and s3:PutObjectTagging. What S3 and SNS
ask KMS for on the caller's behalf (an encrypted bucket or topic) is added by the judge, which knows
the stack's keys (`kms_requests`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

PARTITION = "aws"
ACCOUNT = "000000000000"  # LocalStack's account


_UNSHOWN = frozenset({"ContentType", "ReceiptHandle", "Subject", "UploadId"})


@dataclass(frozen=True)
class Call:
    """One recorded line (fusionfleet/adapters/call_recording.py, fleetctl/local/recording.py)."""

    t: float
    role: str
    process: str
    service: str
    operation: str
    params: Mapping[str, Any]
    presigned: bool
    region: str
    endpoint: str | None

    @classmethod
    def from_line(cls, line: Mapping[str, Any]) -> Call:
        return cls(
            float(line["t"]), str(line["role"]), str(line["process"]), str(line["service"]), str(line["operation"]),
            dict(line.get("params") or {}), bool(line.get("presigned")), str(line.get("region") or "us-east-1"),
            line.get("endpoint"),
        )  # fmt: skip

    def describe(self) -> str:
        shown = {k: v for k, v in self.params.items() if isinstance(v, str) and k not in _UNSHOWN}
        what = ", ".join(f"{k}={v}" for k, v in sorted(shown.items()))
        return f"{self.service}:{self.operation}{' (presigned)' if self.presigned else ''}({what})"


@dataclass(frozen=True)
class IamRequest:
    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()

    def context_dict(self) -> dict[str, str]:
        return dict(self.context)


class UnknownCall(ValueError):
    """A call this mapping does not know: add it here rather than let it pass unjudged."""


def requests_of(call: Call) -> list[IamRequest]:
    handler = _SERVICES.get(call.service)
    if handler is None:
        raise UnknownCall(f"{call.describe()}: no IAM mapping for service {call.service!r}")
    return handler(call)


# ---------------------------------------------------------------- S3


def _bucket_arn(bucket: str) -> str:
    return f"arn:{PARTITION}:s3:::{bucket}"


def _object_arn(bucket: str, key: str) -> str:
    return f"{_bucket_arn(bucket)}/{key}"


_S3_OBJECT_ACTIONS = {
    "GetObject": ("s3:GetObject",),
    "HeadObject": ("s3:GetObject",),
    "PutObject": ("s3:PutObject",),
    "PresignedPost": ("s3:PutObject",),
    "CreateMultipartUpload": ("s3:PutObject",),
    "UploadPart": ("s3:PutObject",),
    "CompleteMultipartUpload": ("s3:PutObject",),
    "AbortMultipartUpload": ("s3:AbortMultipartUpload",),
    "DeleteObject": ("s3:DeleteObject",),
    "GetObjectTagging": ("s3:GetObjectTagging",),
    "PutObjectTagging": ("s3:PutObjectTagging",),
}
_S3_BUCKET_ACTIONS = {
    "ListObjectsV2": "s3:ListBucket",
    "ListObjects": "s3:ListBucket",
    "HeadBucket": "s3:ListBucket",
    "GetBucketLocation": "s3:GetBucketLocation",
    "ListObjectVersions": "s3:ListBucketVersions",
}
_LIST_CONTEXT = {"Prefix": "s3:prefix", "Delimiter": "s3:delimiter", "MaxKeys": "s3:max-keys"}


def _s3(call: Call) -> list[IamRequest]:
    params, operation = call.params, call.operation
    bucket = str(params.get("Bucket", ""))
    if operation in _S3_OBJECT_ACTIONS:
        resource = _object_arn(bucket, str(params["Key"]))
        found = [IamRequest(action, resource) for action in _S3_OBJECT_ACTIONS[operation]]
        if params.get("Tagging") and operation in ("PutObject", "PresignedPost", "CreateMultipartUpload"):
            found.append(IamRequest("s3:PutObjectTagging", resource))
        return found
    if operation == "DeleteObjects":
        keys = [str(item["Key"]) for item in params.get("Delete", {}).get("Objects", [])]
        return [IamRequest("s3:DeleteObject", _object_arn(bucket, key)) for key in keys]
    if operation == "CopyObject":
        source = params["CopySource"]
        if isinstance(source, str):
            source_bucket, _, source_key = unquote(source).lstrip("/").partition("/")
        else:
            source_bucket, source_key = str(source["Bucket"]), str(source["Key"])
        return [
            IamRequest("s3:GetObject", _object_arn(source_bucket, source_key)),
            IamRequest("s3:PutObject", _object_arn(bucket, str(params["Key"]))),
        ]
    if operation in _S3_BUCKET_ACTIONS:
        context = tuple(sorted((key, str(params[name])) for name, key in _LIST_CONTEXT.items() if name in params))
        return [IamRequest(_S3_BUCKET_ACTIONS[operation], _bucket_arn(bucket), context)]
    raise UnknownCall(f"{call.describe()}: no IAM mapping for this S3 operation")


# ---------------------------------------------------------------- SQS, SNS


def queue_arn(url: str, region: str) -> str:
    """The ARN of a queue URL (AWS's https://sqs.<region>.amazonaws.com/<account>/<name>, or LocalStack's
    forms, which end in the same two parts)."""
    account, name = urlparse(url).path.rstrip("/").split("/")[-2:]
    return f"arn:{PARTITION}:sqs:{region}:{account}:{name}"


_SQS_BATCHES = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}


def _sqs(call: Call) -> list[IamRequest]:
    operation = _SQS_BATCHES.get(call.operation, call.operation)
    if "QueueUrl" in call.params:
        resource = queue_arn(str(call.params["QueueUrl"]), call.region)
    elif "QueueName" in call.params:
        resource = f"arn:{PARTITION}:sqs:{call.region}:{ACCOUNT}:{call.params['QueueName']}"
    elif operation == "ListQueues":
        resource = "*"
    else:
        raise UnknownCall(f"{call.describe()}: an SQS call naming no queue")
    return [IamRequest(f"sqs:{operation}", resource)]


def _sns(call: Call) -> list[IamRequest]:
    params = call.params
    if "TopicArn" in params:
        topic = str(params["TopicArn"])
    elif "SubscriptionArn" in params:
        topic = str(params["SubscriptionArn"]).rsplit(":", 1)[0]  # the subscription's topic
    else:
        return [IamRequest(f"sns:{call.operation}", "*")]
    return [IamRequest(f"sns:{call.operation}", topic)]


# ---------------------------------------------------------------- Step Functions, CloudFormation, ECS, others

_WILDCARD_ONLY = frozenset({
    "states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat", "states:ListStateMachines",
    "servicequotas:GetServiceQuota", "servicequotas:GetAWSDefaultServiceQuota", "servicequotas:ListServiceQuotas",
    "ec2:DescribeInstanceTypes", "ec2:DescribeSubnets", "ec2:DescribeRouteTables", "ec2:DescribeVpcEndpoints",
    "ec2:DescribeVpcs", "ec2:DescribeInternetGateways", "ec2:DescribeNatGateways", "sts:GetCallerIdentity",
})  # fmt: skip


def _states(call: Call) -> list[IamRequest]:
    action = f"states:{call.operation}"
    if action in _WILDCARD_ONLY:
        return [IamRequest(action, "*")]
    for name in ("mapRunArn", "executionArn", "stateMachineArn"):
        if name in call.params:
            return [IamRequest(action, str(call.params[name]))]
    raise UnknownCall(f"{call.describe()}: a Step Functions call naming nothing")


def _cloudformation(call: Call) -> list[IamRequest]:
    name = call.params.get("StackName")
    if not name:
        return [IamRequest(f"cloudformation:{call.operation}", "*")]
    arn = str(name) if str(name).startswith("arn:") else (
        f"arn:{PARTITION}:cloudformation:{call.region}:{ACCOUNT}:stack/{name}/00000000-0000-0000-0000-000000000000"
    )  # fmt: skip
    return [IamRequest(f"cloudformation:{call.operation}", arn)]


def _ecs(call: Call) -> list[IamRequest]:
    params = call.params
    cluster = str(params.get("cluster", "default")).rsplit("/", 1)[-1]
    prefix = f"arn:{PARTITION}:ecs:{call.region}:{ACCOUNT}"
    services = params.get("services") or ([params["service"]] if "service" in params else [])
    if services:
        return [
            IamRequest(f"ecs:{call.operation}", _named_arn(f"{prefix}:service/{cluster}", str(s))) for s in services
        ]
    tasks = params.get("tasks") or []
    if tasks:
        return [IamRequest(f"ecs:{call.operation}", _named_arn(f"{prefix}:task/{cluster}", str(t))) for t in tasks]
    return [IamRequest(f"ecs:{call.operation}", f"{prefix}:cluster/{cluster}")]


def _named_arn(prefix: str, name: str) -> str:
    return name if name.startswith("arn:") else f"{prefix}/{name}"


def _wildcard(call: Call) -> list[IamRequest]:
    return [IamRequest(f"{call.service}:{call.operation}", "*")]


_SERVICES = {
    "s3": _s3,
    "sqs": _sqs,
    "sns": _sns,
    "states": _states,
    "cloudformation": _cloudformation,
    "ecs": _ecs,
    "servicequotas": _wildcard,
    "ec2": _wildcard,
    "sts": _wildcard,
}


# ---------------------------------------------------------------- KMS, asked for by S3 and SNS

_DECRYPTS = frozenset({"GetObject", "CopyObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"})
_ENCRYPTS = frozenset({"PutObject", "PresignedPost", "CopyObject", "CreateMultipartUpload", "UploadPart",
                       "CompleteMultipartUpload"})  # fmt: skip


def kms_requests(call: Call, bucket_keys: Mapping[str, str], topic_keys: Mapping[str, str]) -> list[IamRequest]:
    """What S3 (a bucket encrypted with a KMS key) or SNS (an encrypted topic) asks KMS for as the caller:
    a read decrypts; a write generates a data key (and a multipart upload decrypts too); a publish does
    both. The caller's role needs these on the key."""
    if call.service == "s3":
        key = bucket_keys.get(str(call.params.get("Bucket", "")))
        if key is None:
            return []
        via = (("kms:ViaService", f"s3.{call.region}.amazonaws.com"),)
        needed = (["kms:Decrypt"] if call.operation in _DECRYPTS else []) + (
            ["kms:GenerateDataKey"] if call.operation in _ENCRYPTS else []
        )
        return [IamRequest(action, key, via) for action in needed]
    if call.service == "sns" and call.operation == "Publish":
        key = topic_keys.get(str(call.params.get("TopicArn", "")))
        if key is None:
            return []
        via = (("kms:ViaService", f"sns.{call.region}.amazonaws.com"),)
        return [IamRequest("kms:GenerateDataKey", key, via), IamRequest("kms:Decrypt", key, via)]
    return []
