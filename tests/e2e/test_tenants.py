"""Tenants on the local stack: a tenant's job renders into its own outputs, a manifest naming another
tenant's media is refused, and each tenant's subscriber hears only its own tenant's notices."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from fleetctl.samples import grace_hopper_path
from fusionfleet import layout
from fusionfleet.adapters.orchestrator import execution_arn
from fusionfleet.jobs.ids import job_id
from tests.e2e.conftest import Stack
from tests.support.media import decode_all, write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def tenant_inbox(stack: Stack, tenant: str) -> str:
    """A fresh queue subscribed, with `fusionfleet subscribe`, to `tenant`'s notices."""
    sqs = stack.client("sqs")
    url = str(sqs.create_queue(QueueName=f"{tenant}-inbox-{time.monotonic_ns()}")["QueueUrl"])
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    result = stack.cli("subscribe", "--tenant", tenant, "--queue-arn", arn)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith("arn:")
    return url


def envelope_of(stack: Stack, inbox: str, job: str, wait_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        for envelope in stack.envelopes(inbox, wait_s=1, count=10):
            if json.loads(envelope["Message"]).get("job_id") == job:
                return envelope
    raise AssertionError(f"no notice for {job} within {wait_s:.0f} s:\n{stack.logs()}")


def exists(stack: Stack, bucket: str, key: str) -> bool:
    try:
        stack.client("s3").head_object(Bucket=bucket, Key=key)
    except ClientError:
        return False
    return True


def test_a_tenant_renders_into_its_own_outputs_and_cannot_name_another_tenants_media(
    stack: Stack, tmp_path: Path
) -> None:
    # GIVEN subscribers of tenants acme and globex, and an operator's subscriber of everything
    acme, globex, everyone = tenant_inbox(stack, "acme"), tenant_inbox(stack, "globex"), stack.subscribe()
    bucket = stack.resources.media_bucket
    s3 = stack.client("s3")
    clip = write_video(tmp_path / "talk.mp4", seconds=4, fps=25, width=320, height=240)
    destination = tmp_path / "result.mp4"

    # WHEN acme submits a job through the CLI
    result = stack.cli(
        "submit", "--tenant", "acme", "--source", str(grace_hopper_path()), "--target", str(clip),
        "--engine", "copy", "--priority", "high", "--name", "talk", "--wait", "--output", str(destination),
    )  # fmt: skip
    # THEN it renders end to end into acme's outputs, every frame of the target
    assert result.returncode == 0, result.stderr + stack.logs()
    job = result.stdout.strip().splitlines()[-1]
    assert job.startswith("acme_talk-")
    assert exists(stack, bucket, "tenants/acme/outputs/talk.mp4")
    info, frames = decode_all(destination)
    assert len(frames) == info.frame_count == 100
    # AND its success notice reaches acme's subscriber, marked as acme's
    success = envelope_of(stack, acme, job, wait_s=60)
    assert json.loads(success["Message"])["status"] == "succeeded"
    assert success["MessageAttributes"]["tenant"]["Value"] == "acme"
    assert json.loads(success["Message"])["output"]["key"] == "tenants/acme/outputs/talk.mp4"

    # WHEN acme drops a manifest naming globex's video as its target
    s3.upload_file(str(clip), bucket, "tenants/globex/inputs/secret.mp4")
    secret_etag = s3.head_object(Bucket=bucket, Key="tenants/globex/inputs/secret.mp4")["ETag"]
    manifest = {"version": 1, "source": ["tenants/acme/inputs/talk/source-0.jpg"],
                "target": "tenants/globex/inputs/secret.mp4", "engine": "copy"}  # fmt: skip
    etag = s3.put_object(Bucket=bucket, Key="tenants/acme/jobs/steal.json", Body=json.dumps(manifest).encode())["ETag"]
    stolen = job_id(bucket, "tenants/acme/jobs/steal.json", etag)
    # THEN acme's subscriber is told it was rejected, and why
    rejection = envelope_of(stack, acme, stolen, wait_s=120)
    notice = json.loads(rejection["Message"])
    assert notice["status"] == "failed" and notice["stage"] == "validation", notice
    assert "tenants/globex/inputs/secret.mp4" in notice["reason"] and "tenants/acme/" in notice["reason"]
    assert rejection["MessageAttributes"]["tenant"]["Value"] == "acme"
    # AND the operator's unfiltered subscriber heard both of acme's notices
    heard = {json.loads(e["Message"])["job_id"] for e in stack.envelopes(everyone, wait_s=30, count=2)}
    assert heard == {job, stolen}
    # AND globex's subscriber heard nothing at all: neither the rejection nor acme's success
    assert stack.envelopes(globex, wait_s=5, count=1) == []
    # AND nothing was rendered for it: no execution, no plan, no output; globex's video is untouched
    with pytest.raises(ClientError):
        stack.client("stepfunctions").describe_execution(
            executionArn=execution_arn(stack.resources.state_machine_arn, stolen)
        )
    assert not exists(stack, stack.resources.work_bucket, layout.plan_key(stolen))
    assert not exists(stack, bucket, "tenants/acme/outputs/steal.mp4")
    assert s3.head_object(Bucket=bucket, Key="tenants/globex/inputs/secret.mp4")["ETag"] == secret_etag
    assert exists(stack, bucket, "tenants/acme/jobs/steal.json")
    # AND `list --tenant` shows each tenant only its own jobs
    acme_list = stack.cli("list", "--tenant", "acme")
    assert acme_list.returncode == 0 and job in acme_list.stdout and stolen in acme_list.stdout
    assert "REJECTED" in acme_list.stdout
    globex_list = stack.cli("list", "--tenant", "globex")
    assert globex_list.returncode == 0 and "acme_" not in globex_list.stdout
    # AND `status --tenant` answers only for the tenant's own job
    assert stack.cli("status", job, "--tenant", "acme").returncode == 0
    other = stack.cli("status", job, "--tenant", "globex")
    assert other.returncode == 1 and "no job" in other.stderr
