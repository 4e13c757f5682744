"""moto-backed AWS for handler and worker tests; queues come from template.yaml's properties."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import boto3
import pytest
from moto import mock_aws

from fleetctl.samples import grace_hopper_path
from fusionfleet.adapters.notify import SnsNotifier
from fusionfleet.adapters.orchestrator import StepFunctions
from fusionfleet.adapters.storage import S3Storage
from fusionfleet.jobs.plan import SegmentPolicy
from fusionfleet.messages import JobContext
from fusionfleet.services.slicing import SliceOutcome, Slicer
from tests.support.jobs import slicer_config
from tests.support.template import ROOT, create_queues

REGION = "us-east-1"
FIXTURES = ROOT / "tests" / "fixtures"


@dataclass
class Aws:
    s3: Any
    sqs: Any
    sns: Any
    sfn: Any
    queues: dict[str, str]
    media_bucket: str
    work_bucket: str
    topic_arn: str
    state_machine_arn: str
    inbox_url: str

    def notifications(self) -> list[dict[str, Any]]:
        messages = self.sqs.receive_message(QueueUrl=self.inbox_url, MaxNumberOfMessages=10).get("Messages", [])
        return [json.loads(json.loads(m["Body"])["Message"]) for m in messages]

    def executions(self) -> list[dict[str, Any]]:
        return list(self.sfn.list_executions(stateMachineArn=self.state_machine_arn)["executions"])


@pytest.fixture
def ec2() -> Iterator[Any]:
    """EC2 in moto, in REGION (the preflight checks' subnets, endpoints and offerings)."""
    with mock_aws():
        yield boto3.client("ec2", region_name=REGION)


@pytest.fixture
def not_local(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI pointed at AWS itself: no endpoint override and no local stack it could mean instead."""
    for name in ("AWS_ENDPOINT_URL", "FUSIONFLEET_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FUSIONFLEET_LOCAL_DIR", "/nonexistent-local-stack")


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    for name in ("AWS_ENDPOINT_URL", "FUSIONFLEET_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        sns = boto3.client("sns", region_name=REGION)
        sfn = boto3.client("stepfunctions", region_name=REGION)
        for bucket in ("media", "work"):
            s3.create_bucket(Bucket=bucket)
        topic = sns.create_topic(Name="notifications")["TopicArn"]
        inbox = sqs.create_queue(QueueName="inbox")["QueueUrl"]
        inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=inbox_arn)
        definition = (ROOT / "infra" / "statemachine" / "render.asl.json").read_text()
        machine = sfn.create_state_machine(
            name="render", definition=definition, roleArn="arn:aws:iam::123456789012:role/render"
        )["stateMachineArn"]
        yield Aws(s3, sqs, sns, sfn, create_queues(sqs), "media", "work", topic, machine, inbox)


def s3_event(bucket: str, key: str) -> str:
    """The S3 notification body for `key`, URL-encoded as S3 sends keys."""
    event = json.loads((FIXTURES / "s3_manifest_event.json").read_text())
    record = event["Records"][0]["s3"]
    record["bucket"]["name"] = bucket
    record["bucket"]["arn"] = f"arn:aws:s3:::{bucket}"
    record["object"]["key"] = quote_plus(key, safe="/")
    return json.dumps(event)


def sqs_event(*bodies: str) -> dict[str, Any]:
    from infra.emulators.event_source import to_event

    return to_event(
        [
            {"MessageId": f"m{i}", "ReceiptHandle": f"r{i}", "Body": body, "Attributes": {}}
            for i, body in enumerate(bodies)
        ],
        f"arn:aws:sqs:{REGION}:123456789012:IngestQueue",
        REGION,
    )


def upload(aws: Aws, key: str, path: Path) -> None:
    aws.s3.upload_file(str(path), aws.media_bucket, key)


def slice_job(
    aws: Aws, target: Path, target_key: str = "inputs/clip.mp4", segments: SegmentPolicy | None = None, **fields: Any
) -> SliceOutcome:
    """A job of one face (Grace Hopper) and `target`, both uploaded, its manifest (these fields added or in their
    place) dropped at jobs/t.json and handled by the slicer on this stack, segments cut by `segments` when given."""
    upload(aws, "inputs/face.jpg", grace_hopper_path())
    upload(aws, target_key, target)
    manifest = {"version": 1, "source": ["inputs/face.jpg"], "target": target_key, **fields}
    aws.s3.put_object(Bucket=aws.media_bucket, Key="jobs/t.json", Body=json.dumps(manifest).encode())
    policy = {"segments": segments} if segments is not None else {}
    config = slicer_config(aws.work_bucket, aws.state_machine_arn, aws.topic_arn, **policy)
    slicer = Slicer(S3Storage(aws.s3), StepFunctions(aws.sfn), SnsNotifier(aws.sns), config)
    return slicer.handle(aws.media_bucket, "jobs/t.json")


def started_job(
    aws: Aws, target: Path, target_key: str = "inputs/clip.mp4", segments: SegmentPolicy | None = None, **fields: Any
) -> JobContext:
    """As slice_job, the job started: its context, as its execution's input carries it."""
    outcome = slice_job(aws, target, target_key, segments, **fields)
    assert outcome.status == "started", outcome.reason
    payload = json.loads(aws.sfn.describe_execution(executionArn=outcome.execution_arn)["input"])
    return JobContext.model_validate(payload["job"])
