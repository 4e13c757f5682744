"""The API role's S3 grants, read as AWS evaluates them for the requests the API makes."""

from __future__ import annotations

from typing import Any

from tests.support.template import load_template


def _api_statements() -> list[dict[str, Any]]:
    function = load_template()["Resources"]["ApiFunction"]["Properties"]
    return [statement for policy in function["Policies"] for statement in policy["Statement"]]


def test_the_api_may_list_the_media_bucket_for_a_head_so_a_missing_key_is_404() -> None:
    # A HEAD or GET carries no s3:prefix: a plain StringLike on it never matches such a request, S3
    # then answers a missing key 403, and the API took that for an error (500).
    lists = [s for s in _api_statements() if "s3:ListBucket" in s["Action"] and "MediaBucket" in str(s["Resource"])]
    assert lists, "the API role no longer lists the media bucket"
    for statement in lists:
        condition = statement.get("Condition", {})
        assert "StringLike" not in condition and "StringEquals" not in condition, condition
        # A listing itself still stays under tenants/.
        assert condition.get("StringLikeIfExists", {}).get("s3:prefix") == "tenants/*"
