"""A job's final notice is sent once, by whoever creates its notice record, on the real local stack.

The state machine claims the record (a conditional S3 create from the state machine itself) just
before it publishes; the watchdog and a cancel claim the same record before they stop a job. So a
job that reaches its notice as it is stopped is told once (render.asl.json, fusionfleet.services.watchdog).
"""

from __future__ import annotations

import hashlib
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
from tests.e2e.helpers import notice_for, wait_until
from tests.support.media import write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_video(tmp_path_factory.mktemp("once") / "short.mp4", seconds=3, fps=25, width=160, height=120)


def manifest_of(stack: Stack, name: str, target: Path) -> tuple[str, bytes]:
    """Uploads the media; returns the job id the manifest will have and the manifest's bytes."""
    s3 = stack.client("s3")
    bucket = stack.resources.media_bucket
    s3.upload_file(str(grace_hopper_path()), bucket, f"inputs/{name}/face.jpg")
    s3.upload_file(str(target), bucket, f"inputs/{name}/{target.name}")
    body = json.dumps({"version": 1, "source": [f"inputs/{name}/face.jpg"], "target": f"inputs/{name}/{target.name}",
                       "engine": "copy", "priority": "high"}).encode()  # fmt: skip
    # A single-part PUT's ETag is the body's MD5: the job id is known before the manifest lands.
    return job_id(bucket, f"jobs/{name}.json", f'"{hashlib.md5(body).hexdigest()}"'), body


def execution_of(stack: Stack, job: str) -> dict[str, Any]:
    arn = execution_arn(stack.resources.state_machine_arn, job)
    try:
        described: dict[str, Any] = stack.client("stepfunctions").describe_execution(executionArn=arn)
    except ClientError as error:
        # Not started yet (the slicer runs after the manifest lands). Another client's exception
        # classes are not this one's, so the code is compared, not the class.
        if error.response.get("Error", {}).get("Code") == "ExecutionDoesNotExist":
            return {"status": "PENDING"}
        raise
    return described


def notice_record(stack: Stack, job: str) -> dict[str, Any]:
    body = stack.client("s3").get_object(Bucket=stack.resources.work_bucket, Key=layout.notice_key(job))["Body"]
    record: dict[str, Any] = json.loads(body.read())
    return record


def test_the_state_machine_claims_the_notice_record_before_it_publishes(stack: Stack, short: Path) -> None:
    # GIVEN a job dropped on a subscribed stack
    inbox = stack.subscribe()
    job, body = manifest_of(stack, "once-claimed", short)
    etag = stack.client("s3").put_object(Bucket=stack.resources.media_bucket, Key="jobs/once-claimed.json", Body=body)
    assert job_id(stack.resources.media_bucket, "jobs/once-claimed.json", etag["ETag"]) == job
    # WHEN it renders and notifies
    notice = notice_for(stack, inbox, job, wait_s=300)
    assert notice["status"] == "succeeded", (notice, stack.logs())
    # THEN the notice record was created by the state machine itself (LocalStack runs the conditional
    # create), so neither the watchdog nor a cancel can send a second notice for it
    record = notice_record(stack, job)
    assert record["by"] == "state machine" and record["status"] == "succeeded", record
    assert wait_until(lambda: execution_of(stack, job)["status"] == "SUCCEEDED", timeout_s=60)


def test_a_job_whose_notice_another_party_claimed_publishes_nothing_itself(stack: Stack, short: Path) -> None:
    # GIVEN a job whose notice record another party (the watchdog stopping it, a cancel) created and
    # published before the job reached its own notice
    inbox = stack.subscribe()
    job, body = manifest_of(stack, "once-taken", short)
    taken = {"claimed_at": "2026-01-01T00:00:00+00:00", "published": True, "published_by": "the test"}
    s3 = stack.client("s3")
    s3.put_object(Bucket=stack.resources.work_bucket, Key=layout.notice_key(job), Body=json.dumps(taken).encode())
    # WHEN the job is dropped and renders to its end
    s3.put_object(Bucket=stack.resources.media_bucket, Key="jobs/once-taken.json", Body=body)
    ended = wait_until(
        lambda: execution_of(stack, job)["status"] not in ("PENDING", "RUNNING"), timeout_s=300, poll_s=2
    )
    described = execution_of(stack, job)
    # THEN its execution ended without publishing, saying why, and the record is the other party's
    assert ended and (described["status"], described.get("error")) == ("FAILED", "NoticeNotClaimed"), described
    assert notice_record(stack, job) == taken
    # AND no notice for it arrives (the others' notices are skipped)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert [n for n in stack.notifications(inbox, wait_s=2, count=10) if n.get("job_id") == job] == []
