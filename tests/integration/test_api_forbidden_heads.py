"""The tenant API as AWS answers it when a HEAD of a missing key is 403, not 404.

S3 answers 404 for a missing key only when the caller may list the bucket for that request; a
ListBucket grant conditioned on s3:prefix does not match a HEAD (which carries no prefix), so on AWS
the API's HEADs of objects not uploaded yet, or of another tenant's keys, come back 403. moto does not
enforce IAM: a botocore hook on the real client answers such HEADs 403, as AWS would.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from functions.api.app import tenant_jobs
from tests.integration.conftest import REGION, Aws
from tests.support.api import Answer, call_api
from tests.support.jobs import api_config


class ForbiddenHeads:
    """Answers 403 to every HEAD of a media key that does not exist (checked through a second client)."""

    def __init__(self, aws: Aws) -> None:
        self.checker = boto3.client("s3", region_name=REGION)
        self.bucket = aws.media_bucket
        self.refused: list[str] = []

    def __call__(self, params: dict[str, Any], **_: Any) -> None:
        if params.get("Bucket") != self.bucket:
            return
        try:
            self.checker.head_object(Bucket=params["Bucket"], Key=params["Key"])
        except ClientError:
            self.refused.append(params["Key"])
            raise ClientError({"Error": {"Code": "403", "Message": "Forbidden"}}, "HeadObject") from None


@pytest.fixture
def api(aws: Aws) -> tuple[Any, ForbiddenHeads]:
    jobs = tenant_jobs(api_config(aws.media_bucket, aws.work_bucket, aws.state_machine_arn, aws.topic_arn))
    hook = ForbiddenHeads(aws)
    # The S3 client the API's storage holds: its HEADs go through the hook.
    jobs.storage._s3.meta.events.register("before-parameter-build.s3.HeadObject", hook)  # type: ignore[attr-defined]
    return jobs, hook


def call(jobs: Any, method: str, path: str, body: object = None, tenant: str = "acme") -> Answer:
    return call_api(jobs, method, path, body, tenant)


def test_a_created_job_reads_pending_and_lists_while_its_manifest_head_is_403(api: tuple[Any, ForbiddenHeads]) -> None:
    jobs, hook = api
    job_id = call(jobs, "POST", "/jobs", {"source": "face.jpg", "target": "clip.mp4"}).body["job_id"]

    status = call(jobs, "GET", f"/jobs/{job_id}")
    listing = call(jobs, "GET", "/jobs")
    detail = call(jobs, "GET", f"/jobs/{job_id}/detail")
    logs = call(jobs, "GET", f"/jobs/{job_id}/logs")
    preview = call(jobs, "GET", f"/jobs/{job_id}/preview")

    assert hook.refused, "the hook never answered 403: the test does not exercise what it names"
    assert (status.status, status.body["state"]) == (200, "PENDING")
    assert listing.status == 200 and [job["job_id"] for job in listing.body["jobs"]] == [job_id]
    assert detail.status == 200 and detail.body["segments"] == []
    assert logs.status == 200
    assert preview.status == 404
    assert call(jobs, "POST", f"/jobs/{job_id}/cancel").status == 409
    assert call(jobs, "POST", f"/jobs/{job_id}/retry").status == 409


def test_start_with_an_upload_missing_is_409_naming_it_not_500(aws: Aws, api: tuple[Any, ForbiddenHeads]) -> None:
    jobs, hook = api
    created = call(jobs, "POST", "/jobs", {"source": "face.jpg", "target": "clip.mp4"}).body
    face = next(upload for upload in created["uploads"] if upload["name"] == "face.jpg")
    aws.s3.put_object(Bucket=aws.media_bucket, Key=face["key"], Body=b"jpeg")

    response = call(jobs, "POST", f"/jobs/{created['job_id']}/start")

    assert response.status == 409
    assert "clip.mp4" in response.body["error"] and "face.jpg" not in response.body["error"]
    assert any(key.endswith("clip.mp4") for key in hook.refused)


def test_another_tenants_job_is_404_on_every_route_when_heads_are_403(api: tuple[Any, ForbiddenHeads]) -> None:
    jobs, hook = api
    job_id = call(jobs, "POST", "/jobs", {"source": "face.jpg", "target": "clip.mp4"}).body["job_id"]

    for method, path in (
        ("GET", f"/jobs/{job_id}"),
        ("GET", f"/jobs/{job_id}/detail"),
        ("GET", f"/jobs/{job_id}/logs"),
        ("GET", f"/jobs/{job_id}/preview"),
        ("POST", f"/jobs/{job_id}/start"),
        ("POST", f"/jobs/{job_id}/cancel"),
        ("POST", f"/jobs/{job_id}/retry"),
    ):
        assert call(jobs, method, path, tenant="globex").status == 404, (method, path)
    assert call(jobs, "GET", "/jobs", tenant="globex").body["jobs"] == []
    assert hook.refused
