"""Recording AWS calls as a role (the IAM judge's input), on moto: what each line holds and leaves out."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
from moto import mock_aws

from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.call_recording import recorder_for
from fusionfleet.adapters.storage import S3Storage


def test_each_call_is_one_line_naming_what_it_touches_as_the_role_and_no_body(tmp_path: Path) -> None:
    # GIVEN a process whose environment asks for recording as the API's role
    env = {"FUSIONFLEET_IAM_RECORD_DIR": str(tmp_path), "FUSIONFLEET_IAM_ROLE": "ApiFunctionRole"}
    recorder = recorder_for(env, ["python", "-m", "x", "--name", "api"], 42)
    assert recorder is not None and recorder.path == tmp_path / "calls-api-42.jsonl"
    with mock_aws():
        s3 = AwsTarget("us-east-1", record_calls=False).client("s3")
        s3.create_bucket(Bucket="fleet-media")
        recorder.attach(s3)
        storage = S3Storage(s3)
        # WHEN it writes, deletes by prefix, presigns a link and an upload form
        storage.put_bytes("fleet-media", "tenants/a/jobs/j.json", b'{"secret": "face"}')
        storage.delete_prefix("fleet-media", "tenants/a/jobs/")
        storage.presign_get("fleet-media", "tenants/a/outputs/o.mp4", 60)
        storage.presign_post("fleet-media", "tenants/a/inputs/f.jpg", 60, 1024, {"fusionfleet-retention": "input"})
    lines = [json.loads(line) for line in recorder.path.read_text().splitlines()]
    # THEN each call is a line with its role, process, operation and what it names, and no body
    calls = [(line["operation"], line["params"].get("Key") or line["params"].get("Prefix"), line["presigned"])
             for line in lines]  # fmt: skip
    assert calls == [
        ("PutObject", "tenants/a/jobs/j.json", False),
        ("ListObjectsV2", "tenants/a/jobs/", False),
        ("DeleteObjects", None, False),
        ("GetObject", "tenants/a/outputs/o.mp4", True),
        ("PresignedPost", "tenants/a/inputs/f.jpg", True),
    ]
    assert all(line["role"] == "ApiFunctionRole" and line["process"] == "api" for line in lines)
    assert lines[2]["params"]["Delete"]["Objects"] == [{"Key": "tenants/a/jobs/j.json"}]
    assert "Tagging" in lines[4]["params"] and "secret" not in recorder.path.read_text()


def test_nothing_is_recorded_unless_both_the_folder_and_the_role_are_set(tmp_path: Path) -> None:
    assert recorder_for({"FUSIONFLEET_IAM_RECORD_DIR": str(tmp_path)}, ["x"], 1) is None
    assert recorder_for({"FUSIONFLEET_IAM_ROLE": "RenderTaskRole"}, ["x"], 1) is None
    assert recorder_for({}, ["x"], 1) is None
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="fleet-quiet")
    assert list(tmp_path.iterdir()) == []
