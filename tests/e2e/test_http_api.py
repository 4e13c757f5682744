"""The HTTP API on the local stack: a token from `local token`, presigned uploads, start, poll, download.

Everything goes over HTTP as a client would do it (no AWS credentials): the API process of the local
stack checks the token, the files go straight to S3 through their presigned URLs, and the result
comes back through the job's `download_url`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from fleetctl.api_client import form_body, upload_refusal
from fleetctl.samples import grace_hopper_path
from fusionfleet import layout
from fusionfleet.adapters.storage import S3Storage
from tests.e2e.conftest import ROOT, Stack
from tests.e2e.helpers import api_call, api_token, api_url, post_file
from tests.support.media import decode_all, write_video

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def test_a_tenant_submits_follows_and_downloads_a_job_through_the_api(stack: Stack, tmp_path: Path) -> None:
    # GIVEN a token for tenant acme from `local token`, and the API's URL from `local status`
    api = api_url(stack)
    acme, globex = api_token(stack, "acme"), api_token(stack, "globex")
    clip = write_video(tmp_path / "clip.mp4", seconds=4, fps=25, width=320, height=240)
    # WHEN acme creates a job with its file names
    body = {"source": ["face.jpg"], "target": "clip.mp4", "engine": "copy", "priority": "high"}
    status, created = api_call(api, acme, "POST", "/jobs", body)
    assert status == 201, created
    job = created["job_id"]
    # AND puts each file to its presigned URL, then starts the job
    files = {"face.jpg": grace_hopper_path(), "clip.mp4": clip}
    for upload in created["uploads"]:
        assert post_file(upload, files[upload["name"]]) == 204
    # AND each upload carries the tag the template's lifecycle rule expires tenants' uploads by
    s3 = stack.client("s3")
    for upload in created["uploads"]:
        tags = s3.get_object_tagging(Bucket=stack.resources.media_bucket, Key=upload["key"])["TagSet"]
        assert {"Key": "fusionfleet-retention", "Value": "input"} in tags, (upload["key"], tags)
    status, started = api_call(api, acme, "POST", f"/jobs/{job}/start")
    assert status == 202, started
    # THEN polling the job sees it succeed, every segment done
    deadline = time.monotonic() + 300
    view: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status, view = api_call(api, acme, "GET", f"/jobs/{job}")
        assert status == 200, view
        if view["ended"]:  # a tenant's job may read WAITING for a moment before its turn comes
            break
        time.sleep(1)
    assert view["state"] == "SUCCEEDED", (view, stack.logs())
    segments = view["segments"]
    assert segments["done"] == segments["total"] > 0 and segments["failed"] == 0
    # AND the download URL gives the whole video, frame for frame
    result = tmp_path / "result.mp4"
    with urllib.request.urlopen(view["download_url"], timeout=60) as response:
        result.write_bytes(response.read())
    _info, frames = decode_all(result)
    assert len(frames) == 100
    # AND the output lies under the tenant's own prefix
    output = stack.client("s3").list_objects_v2(Bucket=stack.resources.media_bucket, Prefix="tenants/acme/outputs/")
    assert any(item["Key"].startswith(f"tenants/acme/outputs/{job}") for item in output.get("Contents", []))
    # AND another tenant's token finds no such job, and lists none of acme's
    assert api_call(api, globex, "GET", f"/jobs/{job}")[0] == 404
    assert api_call(api, globex, "POST", f"/jobs/{job}/cancel")[0] == 404
    assert job not in [item["job_id"] for item in api_call(api, globex, "GET", "/jobs")[1]["jobs"]]
    assert job in [item["job_id"] for item in api_call(api, acme, "GET", "/jobs")[1]["jobs"]]
    # AND without a valid token there is nothing at all
    assert api_call(api, acme + "x", "GET", "/jobs")[0] == 401


def test_submit_goes_through_the_api_with_a_token_from_the_environment(stack: Stack, tmp_path: Path) -> None:
    # GIVEN the API's URL and a token in the variables `submit` reads
    api, token = api_url(stack), api_token(stack, "acme")
    clip = write_video(tmp_path / "clip.mp4", seconds=2, fps=25, width=320, height=240)
    result_path = tmp_path / "out" / "result.mp4"
    env = {**stack.env(), "FUSIONFLEET_API_URL": api, "FUSIONFLEET_TOKEN": token}
    # WHEN a job is submitted and waited for
    result = subprocess.run(
        [sys.executable, "-m", "fleetctl.cli", "submit", "--source", str(grace_hopper_path()), "--target", str(clip),
         "--engine", "copy", "--wait", "--timeout", "300", "--output", str(result_path)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    # THEN it succeeds, prints the API's job id last, and the result is downloaded frame for frame
    assert result.returncode == 0, (result.stderr, stack.logs())
    job = result.stdout.splitlines()[-1]
    assert api_call(api, token, "GET", f"/jobs/{job}")[1]["state"] == "SUCCEEDED"
    assert len(decode_all(result_path)[1]) == 50

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "fleetctl.cli", *argv], env=env, cwd=ROOT, capture_output=True,
                              text=True, timeout=120, check=False)  # fmt: skip

    # AND the tenant follows it with the job commands through the API: status as the API's own JSON,
    status = cli("status", job, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["state"] == "SUCCEEDED"
    # its listing, and its result again under the output's own name (the job's name and the output's kind)
    assert job in cli("list").stdout
    fetched = cli("download", job, "--output-dir", str(tmp_path / "again"))
    assert fetched.returncode == 0, fetched.stderr
    (again,) = (tmp_path / "again").iterdir()
    assert again.name.startswith("clip-") and again.suffix == ".mp4"
    assert len(decode_all(again)[1]) == 50


def test_s3_refuses_an_upload_over_the_forms_limit_and_the_client_names_file_and_limit(
    stack: Stack, tmp_path: Path
) -> None:
    # GIVEN a form as the API signs it, with a limit of 1 KiB
    bucket, key = stack.resources.media_bucket, "tenants/acme/inputs/e2e-limit/clip.mp4"
    form = S3Storage(stack.client("s3")).presign_post(bucket, key, 300, 1024, dict([layout.INPUT_RETENTION_TAG]))
    big = tmp_path / "clip.mp4"
    big.write_bytes(b"x" * 4096)
    # WHEN 4 KiB are posted to it (the client's own check skipped: S3 must refuse it too)
    body, content_type = form_body(form.fields, big.name, big.read_bytes())
    request = urllib.request.Request(form.url, data=body, method="POST", headers={"Content-Type": content_type})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)
    # THEN S3 refuses it, nothing is stored, and the client's message names the file and the limit
    told = upload_refusal(big, refused.value.code, refused.value.read(), 1024)
    assert str(big) in told and "over the upload limit of 1024 bytes" in told, told
    listed = stack.client("s3").list_objects_v2(Bucket=bucket, Prefix="tenants/acme/inputs/e2e-limit/")
    assert listed.get("KeyCount") == 0
    # AND a form without the retention tag is refused as well
    untagged = {name: value for name, value in form.fields.items() if name != "tagging"}
    small, content_type = form_body(untagged, big.name, b"x")
    request = urllib.request.Request(form.url, data=small, method="POST", headers={"Content-Type": content_type})
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(request, timeout=60)
