"""The S3 adapter against moto: large files go up in parts, conditional creates, last change."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from fusionfleet.adapters.storage import MIN_PART_BYTES, S3Storage
from fusionfleet.errors import DeleteFailed
from tests.integration.conftest import Aws


def test_a_file_larger_than_a_part_is_uploaded_in_parts_and_arrives_whole(aws: Aws, tmp_path: Path) -> None:
    # GIVEN a small part size and a file of two and a half parts
    storage = S3Storage(aws.s3, part_bytes=MIN_PART_BYTES)
    path = tmp_path / "output.mp4"
    data = bytes(range(256)) * (MIN_PART_BYTES * 5 // 2 // 256)
    path.write_bytes(data)
    # WHEN it is uploaded
    etag = storage.upload_file("media", "outputs/big.mp4", path, "video/mp4")
    # THEN it went up as three parts (S3's multipart ETag says how many) and reads back byte for byte
    assert etag.endswith("-3")
    body = aws.s3.get_object(Bucket="media", Key="outputs/big.mp4")
    assert hashlib.sha256(body["Body"].read()).digest() == hashlib.sha256(data).digest()
    assert body["ContentType"] == "video/mp4"
    # AND no unfinished upload is left behind
    assert aws.s3.list_multipart_uploads(Bucket="media").get("Uploads", []) == []


def test_a_file_within_one_part_is_one_put(aws: Aws, tmp_path: Path) -> None:
    storage = S3Storage(aws.s3, part_bytes=MIN_PART_BYTES)
    path = tmp_path / "small.mp4"
    path.write_bytes(b"x" * 1000)
    assert "-" not in storage.upload_file("media", "outputs/small.mp4", path)


def test_parts_smaller_than_s3_allows_are_refused(aws: Aws) -> None:
    with pytest.raises(ValueError, match="at least"):
        S3Storage(aws.s3, part_bytes=1024)


def test_create_writes_only_once(aws: Aws) -> None:
    storage = S3Storage(aws.s3)
    assert storage.create("work", "work/j/notice.json", b"{}") is True
    assert storage.create("work", "work/j/notice.json", b'{"second": true}') is False
    assert storage.get_bytes("work", "work/j/notice.json") == b"{}"


def test_latest_change_is_the_newest_object_under_the_prefix(aws: Aws) -> None:
    storage = S3Storage(aws.s3)
    assert storage.latest_change("work", "work/j/") is None
    storage.put_bytes("work", "work/j/a", b"1")
    first = storage.latest_change("work", "work/j/")
    storage.put_bytes("work", "work/j/b", b"2")
    latest = storage.latest_change("work", "work/j/")
    assert first is not None and latest is not None and latest >= first


def test_a_refused_delete_raises_naming_every_key_and_leaves_the_objects(aws: Aws) -> None:
    # GIVEN objects under a prefix and a bucket policy that refuses deleting some of them
    storage = S3Storage(aws.s3)
    for name in ("a", "b", "keep/c"):
        storage.put_bytes("work", f"work/j/{name}", b"1")
    aws.s3.put_bucket_policy(
        Bucket="work",
        Policy=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Deny",
                        "Principal": "*",
                        "Action": "s3:DeleteObject",
                        "Resource": "arn:aws:s3:::work/work/j/*",
                    }
                ],
            }
        ),
    )
    # WHEN the prefix is deleted
    with pytest.raises(DeleteFailed) as raised:
        storage.delete_prefix("work", "work/j/")
    # THEN the error names each refused key and S3's code, and the objects are all still there
    assert raised.value.keys == ("work/j/a", "work/j/b", "work/j/keep/c")
    assert "AccessDenied" in raised.value.reason and "work/j/keep/c" in raised.value.reason
    assert storage.list_keys("work", "work/j/") == ["work/j/a", "work/j/b", "work/j/keep/c"]


def test_delete_prefix_removes_everything_and_counts_it(aws: Aws) -> None:
    storage = S3Storage(aws.s3)
    for index in range(3):
        storage.put_bytes("work", f"work/j/{index}", b"1")
    storage.put_bytes("work", "work/other", b"1")
    assert storage.delete_prefix("work", "work/j/") == 3
    assert storage.list_keys("work", "work/") == ["work/other"]


@pytest.mark.parametrize("size", [1000, MIN_PART_BYTES * 2 + 1], ids=["one-put", "in-parts"])
def test_tags_given_on_upload_are_on_the_object(aws: Aws, tmp_path: Path, size: int) -> None:
    # GIVEN a file, small or larger than a part
    storage = S3Storage(aws.s3, part_bytes=MIN_PART_BYTES)
    path = tmp_path / "face.jpg"
    path.write_bytes(b"x" * size)
    # WHEN it is uploaded with a tag
    key = "tenants/acme/inputs/a/face.jpg"
    storage.upload_file("media", key, path, "image/jpeg", {"fusionfleet-retention": "input"})
    # THEN S3 holds the tag from the start (what a lifecycle tag filter matches)
    tags = aws.s3.get_object_tagging(Bucket="media", Key=key)["TagSet"]
    assert tags == [{"Key": "fusionfleet-retention", "Value": "input"}]
