"""Hardening of the AWS stage, each visible in template.yaml: TLS-only and encrypted buckets, versioned
outputs, lifecycle rules (work files, uploaded faces), encrypted topics and queues, and the smaller deploy
blockers (reserved concurrency on new accounts, capacity provider names, the merge image).

Checks run over every resource of a kind (every bucket, topic, queue, function), on the template as
CloudFormation receives it after the SAM transform, with the AWS stage's conditions evaluated.
"""

from __future__ import annotations

import fnmatch
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.support.cfn import Conditions, Template, existing, parameter_values, references, transform

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "gpu_worker" / "Dockerfile"


@cache
def _aws() -> tuple[Template, Conditions, dict[str, Any]]:
    template = transform("prod")
    conditions = Conditions(template, parameter_values(template, "prod"))
    return template, conditions, existing(template, conditions)


def _of_type(kind: str) -> dict[str, Any]:
    return {n: r for n, r in _aws()[2].items() if r["Type"] == kind}


def _if(node: Any, conditions: Conditions) -> Any:
    """A value with its Fn::If resolved for these conditions (None for AWS::NoValue)."""
    if isinstance(node, dict) and set(node) == {"Fn::If"}:
        name, when_true, when_false = node["Fn::If"]
        return _if(when_true if conditions[name] else when_false, conditions)
    return None if node == {"Ref": "AWS::NoValue"} else node


# ---------------------------------------------------------------- buckets


@pytest.mark.parametrize("bucket", sorted(_of_type("AWS::S3::Bucket")))
def test_every_bucket_is_encrypted_private_and_refuses_plain_http(bucket: str) -> None:
    _, conditions, present = _aws()
    properties = present[bucket]["Properties"]
    assert properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert all(properties["PublicAccessBlockConfiguration"].values())
    # GIVEN the bucket policies that exist on AWS for this bucket
    policies = [
        r["Properties"]["PolicyDocument"]["Statement"]
        for r in _of_type("AWS::S3::BucketPolicy").values()
        if bucket in set(references(r["Properties"]["Bucket"], conditions))
    ]
    # THEN one denies every request that does not use TLS, on the bucket and on its objects
    denials = [
        s
        for statements in policies
        for s in (_if(statement, conditions) for statement in statements)
        if s is not None
        and s["Effect"] == "Deny"
        and s["Principal"] == "*"
        and s["Action"] == "s3:*"
        and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    ]
    assert len(denials) == 1, bucket
    targets = [str(r) for r in denials[0]["Resource"]]
    assert len(targets) == 2 and any("/*" in t for t in targets), targets


def _rules(bucket: str, conditions: Conditions | None = None) -> list[dict[str, Any]]:
    """A bucket's lifecycle rules on AWS (a rule under Fn::If exists when its condition holds)."""
    rules = _aws()[2][bucket]["Properties"]["LifecycleConfiguration"]["Rules"]
    chosen = [_if(rule, conditions or _aws()[1]) for rule in rules]
    return [rule for rule in chosen if rule is not None]


@pytest.mark.parametrize("bucket", sorted(_of_type("AWS::S3::Bucket")))
def test_every_bucket_cleans_up_half_uploads_and_old_versions(bucket: str) -> None:
    properties = _aws()[2][bucket]["Properties"]
    rules = _rules(bucket)
    assert all(r["Status"] == "Enabled" for r in rules)
    # THEN abandoned multipart uploads are aborted
    assert any("AbortIncompleteMultipartUpload" in r for r in rules)
    # AND where versions are kept, overwritten ones do not stay forever
    if properties.get("VersioningConfiguration", {}).get("Status") == "Enabled":
        assert any("NoncurrentVersionExpiration" in r and "Prefix" not in r and "TagFilters" not in r for r in rules)


def test_outputs_are_versioned_so_an_overwritten_output_can_be_recovered() -> None:
    # The manifest names its output key: a second job may write the same key.
    assert _aws()[2]["MediaBucket"]["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}


def test_work_files_expire() -> None:
    (rule,) = [r for r in _rules("WorkBucket") if r.get("Prefix") == "work/"]
    assert rule["ExpirationInDays"] == {"Ref": "WorkRetentionDays"}


def test_uploaded_faces_expire_after_the_retention_setting_with_their_old_versions() -> None:
    # GIVEN the retention parameter for uploaded media (faces are biometric data)
    template = _aws()[0]
    parameter = template["Parameters"]["FaceRetentionDays"]
    assert parameter["Type"] == "Number" and int(parameter["Default"]) >= 1
    rules = _rules("MediaBucket")
    # WHEN the media bucket's lifecycle rules are read
    by_prefix = {r["Prefix"]: r for r in rules if "Prefix" in r}
    tagged = [r for r in rules if "TagFilters" in r]
    # THEN plain inputs/ uploads expire after it, and their overwritten versions within a day
    assert by_prefix["inputs/"]["ExpirationInDays"] == {"Ref": "FaceRetentionDays"}
    assert by_prefix["inputs/"]["NoncurrentVersionExpiration"]["NoncurrentDays"] <= 1
    # AND so do tagged uploads (a tenant's tenants/<tenant>/inputs/: lifecycle prefixes take no wildcards)
    (rule,) = tagged
    assert rule["TagFilters"] == [{"Key": "fusionfleet-retention", "Value": "input"}]
    assert rule["ExpirationInDays"] == {"Ref": "FaceRetentionDays"}
    assert rule["NoncurrentVersionExpiration"]["NoncurrentDays"] <= 1
    # AND nothing else in the media bucket (outputs, manifests) expires on the face clock
    on_face_clock = [r for r in rules if r.get("ExpirationInDays") == {"Ref": "FaceRetentionDays"}]
    assert on_face_clock == [by_prefix["inputs/"], rule]


# ---------------------------------------------------------------- topics and queues


@pytest.mark.parametrize("topic", sorted(_of_type("AWS::SNS::Topic")))
def test_every_topic_is_encrypted_with_a_rotated_key_of_the_stack(topic: str) -> None:
    _, conditions, present = _aws()
    key = _if(present[topic]["Properties"].get("KmsMasterKeyId"), conditions)
    assert key is not None, topic
    (name,) = set(references(key, conditions))
    assert present[name]["Type"] == "AWS::KMS::Key"
    assert present[name]["Properties"]["EnableKeyRotation"] is True


def test_topics_stay_unencrypted_on_the_local_stack_which_runs_no_kms() -> None:
    template = transform("local")
    conditions = Conditions(template, parameter_values(template, "local"))
    local = existing(template, conditions)
    topics = [r for r in local.values() if r["Type"] == "AWS::SNS::Topic"]
    assert topics
    assert [_if(t["Properties"].get("KmsMasterKeyId"), conditions) for t in topics] == [None] * len(topics)
    assert not [r for r in local.values() if r["Type"].startswith("AWS::KMS::")]


@pytest.mark.parametrize("queue", sorted(_of_type("AWS::SQS::Queue")))
def test_every_queue_is_encrypted_at_rest(queue: str) -> None:
    properties = _aws()[2][queue]["Properties"]
    assert properties.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in properties


# ---------------------------------------------------------------- smaller deploy blockers


def _reserved(parameters: dict[str, str]) -> dict[str, Any]:
    template = transform("prod")
    values = parameter_values(template, "prod") | parameters
    conditions = Conditions(template, values)
    reserved: dict[str, Any] = {}
    for name, resource in existing(template, conditions).items():
        if resource["Type"] == "AWS::Lambda::Function":
            value = _if(resource["Properties"].get("ReservedConcurrentExecutions"), conditions)
            if value is not None:
                reserved[name] = values[value["Ref"]] if isinstance(value, dict) else value
    return reserved


def test_no_function_reserves_concurrency_by_default() -> None:
    # A new account has 10 concurrent executions and Lambda keeps 10 unreserved: any reservation fails.
    assert _reserved({}) == {}


def test_a_reservation_can_be_asked_for() -> None:
    assert _reserved({"SlicerReservedConcurrency": "10"}) == {"SlicerFunction": "10", "WatchdogFunction": 1}


@pytest.mark.parametrize("stack", ["aws-render", "ecs-farm", "Fargate1", "fusionfleet"])
def test_capacity_provider_names_are_valid_for_any_stack_name(stack: str) -> None:
    for name, resource in _of_type("AWS::ECS::CapacityProvider").items():
        # GIVEN the name the stack gives its capacity provider (a generated one starts with the stack's)
        value = resource["Properties"].get("Name")
        assert isinstance(value, dict) and "Fn::Sub" in value, name
        rendered = value["Fn::Sub"].replace("${AWS::StackName}", stack)
        # THEN it never starts with a prefix ECS reserves, and uses only the characters ECS allows
        assert not re.match(r"(?i)(aws|ecs|fargate)", rendered), rendered
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,255}", rendered), rendered


def test_the_merge_runs_its_own_cpu_image() -> None:
    # GIVEN the merge task definition, the template's rules and the Dockerfile
    template = transform("prod")
    (container,) = template["Resources"]["MergeTaskDefinition"]["Properties"]["ContainerDefinitions"]
    text = DOCKERFILE.read_text()
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.MULTILINE)
    # THEN the merge pulls MergeImage, which an AWS stage must set
    assert container["Image"] == {"Ref": "MergeImage"}
    assert '"Ref": "MergeImage"' in str(template["Rules"]).replace("'", '"')
    # AND the Dockerfile's `merge` target is not built on the CUDA image
    merge_base = next(image for image, name in stages if name == "merge")
    assert "cuda" not in merge_base.lower() and merge_base not in {"base", "build", "${CUDA_IMAGE}"}
    # AND the default target (the last stage) is still the GPU render worker
    assert stages[-1][0] == "base"


# ---------------------------------------------------------------- media: kept, encrypted, fed only by its bucket


@pytest.mark.parametrize("name", ["MediaBucket", "MediaKey", "NotificationKey"])
def test_media_and_keys_survive_stack_deletion_and_replacement(name: str) -> None:
    resource = _aws()[2][name]
    assert (resource.get("DeletionPolicy"), resource.get("UpdateReplacePolicy")) == ("Retain", "Retain")


def test_outputs_and_previews_expire_after_the_retention_setting_and_are_kept_without_one() -> None:
    # GIVEN the output retention parameter: 0 (the default) keeps outputs and previews
    template = _aws()[0]
    assert template["Parameters"]["OutputRetentionDays"]["Default"] == 0
    assert not [r for r in _rules("MediaBucket") if "output" in str(r.get("Id"))]
    # WHEN it is set
    conditions = Conditions(template, {**parameter_values(template, "prod"), "OutputRetentionDays": 30})
    rules = {r["Id"]: r for r in _rules("MediaBucket", conditions)}
    # THEN outputs/ (outputs and their previews beside them) and anything tagged as an output (a tenant's
    # tenants/<t>/outputs/, which a lifecycle prefix cannot name) expire after it, old versions a day on
    assert rules["expire-outputs"]["Prefix"] == "outputs/"
    assert rules["expire-tagged-outputs"]["TagFilters"] == [{"Key": "fusionfleet-retention", "Value": "output"}]
    for rule in (rules["expire-outputs"], rules["expire-tagged-outputs"]):
        assert rule["ExpirationInDays"] == {"Ref": "OutputRetentionDays"} and rule["Status"] == "Enabled"
        assert rule["NoncurrentVersionExpiration"] == {"NoncurrentDays": 1}


@pytest.mark.parametrize(("bucket", "alias"), [("MediaBucket", "media"), ("WorkBucket", "work")])
def test_both_buckets_are_encrypted_with_a_rotated_key_of_the_stack_on_aws_and_by_s3_locally(
    bucket: str, alias: str
) -> None:
    # Reference face frames, previews and segments of users' videos are in the work bucket too.
    _, conditions, present = _aws()
    (rule,) = present[bucket]["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    on_aws = _if(rule, conditions)["ServerSideEncryptionByDefault"]
    assert on_aws["SSEAlgorithm"] == "aws:kms" and _if(rule, conditions)["BucketKeyEnabled"] is True
    (key,) = set(references(on_aws["KMSMasterKeyID"], conditions))
    assert present[key]["Type"] == "AWS::KMS::Key" and present[key]["Properties"]["EnableKeyRotation"] is True
    aliases = [r["Properties"] for r in present.values() if r["Type"] == "AWS::KMS::Alias"]
    assert any(a["TargetKeyId"] == {"Ref": key} and a["AliasName"]["Fn::Sub"].endswith(f"-{alias}") for a in aliases)
    local = transform("local")
    local_conditions = Conditions(local, parameter_values(local, "local"))
    (local_rule,) = local["Resources"][bucket]["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert _if(local_rule, local_conditions)["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}


def test_media_is_encrypted_with_a_rotated_key_of_the_stack_on_aws_and_by_s3_locally() -> None:
    _, conditions, present = _aws()
    (rule,) = present["MediaBucket"]["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    on_aws = _if(rule, conditions)["ServerSideEncryptionByDefault"]
    assert on_aws["SSEAlgorithm"] == "aws:kms"
    (key,) = set(references(on_aws["KMSMasterKeyID"], conditions))
    assert present[key]["Type"] == "AWS::KMS::Key" and present[key]["Properties"]["EnableKeyRotation"] is True
    # LocalStack here runs no KMS: the local stage keeps S3's own encryption
    local = transform("local")
    local_conditions = Conditions(local, parameter_values(local, "local"))
    (local_rule,) = local["Resources"]["MediaBucket"]["Properties"]["BucketEncryption"][
        "ServerSideEncryptionConfiguration"
    ]
    assert _if(local_rule, local_conditions)["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}


def test_only_the_media_bucket_may_send_to_the_ingest_queue() -> None:
    # GIVEN the ingest queue's policy for S3
    (statement,) = _aws()[2]["IngestQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "s3.amazonaws.com"}
    condition = statement["Condition"]
    # THEN it names the account and the bucket's ARN (by the name CloudFormation gives the bucket)
    assert condition["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
    pattern = condition["ArnLike"]["aws:SourceArn"]["Fn::Sub"].replace("${AWS::Partition}", "aws")
    assert fnmatch.fnmatchcase("arn:aws:s3:::fleet-mediabucket-1x2y3z4w5v6u", pattern)
    assert not fnmatch.fnmatchcase("arn:aws:s3:::fleet-workbucket-1x2y3z4w5v6u", pattern)
    assert not fnmatch.fnmatchcase("arn:aws:s3:::someone-elses-bucket", pattern)


def test_a_warm_pool_goes_with_one_on_demand_type_as_ec2_auto_scaling_requires() -> None:
    # EC2 Auto Scaling puts no warm pool beside a mixed instances policy or Spot (PutWarmPool).
    template = _aws()[0]
    group = template["Resources"]["GpuAutoScalingGroup"]["Properties"]
    off = _aws()[1]
    on = Conditions(template, {**parameter_values(template, "prod"), "GpuWarmPoolSize": 2})
    assert _if(group["MixedInstancesPolicy"], off) is not None and _if(group["LaunchTemplate"], off) is None
    assert _if(group["MixedInstancesPolicy"], on) is None and _if(group["LaunchTemplate"], on) is not None
    data = template["Resources"]["GpuLaunchTemplate"]["Properties"]["LaunchTemplateData"]
    assert _if(data["InstanceType"], on) == {"Ref": "GpuInstanceType"} and _if(data["InstanceType"], off) is None
    assert on["HasWarmPool"] and not off["HasWarmPool"]
    (rule,) = [r for name, r in template["Rules"].items() if name == "WarmPoolNeedsOneOnDemandType"]
    asserted = [a["Assert"] for a in rule["Assertions"]]
    assert {"Fn::Equals": [{"Ref": "GpuOnDemandPercentage"}, 100]} in asserted
