"""What a client is told when its upload is too large: the file and the limit, before or after S3 refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetctl.api_client import ApiError, form_body, post_form, upload_refusal
from fusionfleet.services.tenant_jobs import MIB, oversized

TOO_LARGE = b"<Error><Code>EntityTooLarge</Code><Message>Your proposed upload exceeds the maximum</Message></Error>"
POLICY = (
    b"<Error><Code>AccessDenied</Code><Message>Invalid according to Policy: Policy Condition failed</Message></Error>"
)


def test_s3s_entity_too_large_names_the_file_and_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "clip.mp4"
    path.write_bytes(b"x" * 300)
    told = upload_refusal(path, 400, TOO_LARGE, 2 * MIB)
    assert str(path) in told and "2 MiB" in told and "300 bytes" in told


def test_a_failed_policy_condition_names_the_file_and_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "face.jpg"
    path.write_bytes(b"x")
    told = upload_refusal(path, 403, POLICY, 512 * 1024)
    assert str(path) in told and "524288 bytes" in told and "policy" in told


def test_a_file_over_the_limit_is_refused_before_it_is_sent(tmp_path: Path) -> None:
    path = tmp_path / "clip.mp4"
    path.write_bytes(b"x" * 11)
    # an address nothing answers on: the check must come first
    with pytest.raises(ApiError, match="over the upload limit") as raised:
        post_form("http://127.0.0.1:9/", {}, path, 10, 1.0)
    assert str(path) in str(raised.value)


def test_the_form_sends_every_field_before_the_file() -> None:
    body, content_type = form_body({"key": "tenants/a/inputs/j/x", "tagging": "<Tagging/>"}, "x", b"DATA")
    boundary = content_type.split("boundary=")[1].encode()
    assert body.index(b'name="key"') < body.index(b'name="tagging"') < body.index(b'name="file"') < body.index(b"DATA")
    assert body.endswith(b"--" + boundary + b"--\r\n")


def test_declared_sizes_over_the_limit_are_named_with_the_limit() -> None:
    problems = oversized({"face.jpg": 10, "clip.mp4": 3 * MIB + 1}, 3 * MIB)
    assert len(problems) == 1 and "clip.mp4" in problems[0] and "3 MiB" in problems[0]
    assert oversized({"clip.mp4": "big"}, MIB) and oversized({"clip.mp4": -1}, MIB) and oversized([], MIB)
    assert oversized({"clip.mp4": MIB}, MIB) == ()
