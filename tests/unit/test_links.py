"""A presigned link's lifetime: the earlier of what was asked and the signing credentials' end.

The clients are real boto3 clients signing with real botocore credentials (RefreshableCredentials
carrying an expiry, as an ECS task role or a Lambda gets them); presigning needs no network.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlparse

import boto3
import botocore.session
import pytest
from botocore.credentials import CredentialProvider, Credentials, RefreshableCredentials

from fusionfleet.adapters.aws import AwsTarget
from fusionfleet.adapters.links import (
    DOWNLOAD_LINK_SECONDS,
    SIGV4_MAX_SECONDS,
    credentials_expiry,
    link_lifetime_s,
)
from fusionfleet.adapters.storage import S3Storage

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _metadata(ends_in: timedelta, key: str = "ASIAEXAMPLE") -> dict[str, str]:
    return {
        "access_key": key,
        "secret_key": "secret",
        "token": "session-token",
        "expiry_time": (datetime.now(UTC) + ends_in).isoformat(),
    }


class _RoleSession(CredentialProvider):
    """Temporary credentials the way a role session hands them out: with an end, refreshable."""

    METHOD = "test-role-session"

    def __init__(self, first: dict[str, str], refresh: Callable[[], dict[str, str]]) -> None:
        super().__init__()
        self._first = first
        self._refresh = refresh

    def load(self) -> RefreshableCredentials:
        return RefreshableCredentials.create_from_metadata(self._first, self._refresh, self.METHOD)


def _client(provider: CredentialProvider | None = None) -> Any:
    session = botocore.session.Session()
    resolver = session.get_component("credential_provider")
    if provider is not None:
        resolver.insert_before("env", provider)
    else:
        session.set_credentials("AKIAEXAMPLE", "secret")  # long-lived keys: no end
    # The project's own client settings (SigV4 presigning among them).
    return AwsTarget(region="us-east-1").client("s3", session=boto3.session.Session(botocore_session=session))


def _expires_param(url: str) -> int:
    return int(parse_qs(urlparse(url).query)["X-Amz-Expires"][0])


def test_a_link_signed_by_a_role_session_ends_with_the_session_and_says_so() -> None:
    # GIVEN a client signing with role credentials that end in two hours
    storage = S3Storage(_client(_RoleSession(_metadata(timedelta(hours=2)), lambda: _metadata(timedelta(hours=2)))))
    # WHEN a 24-hour download link is asked for
    link = storage.presign_link("media", "outputs/clip.mp4", DOWNLOAD_LINK_SECONDS)
    # THEN the link asks for no more than the session has left, and its stated end is the session's
    session_end = datetime.now(UTC) + timedelta(hours=2)
    assert abs((link.expires_at - session_end).total_seconds()) < 5
    assert 7200 - 5 <= _expires_param(link.url) <= 7200
    assert link.expires_at_iso.endswith("Z")


def test_a_link_signed_with_long_lived_keys_lasts_what_was_asked() -> None:
    storage = S3Storage(_client())
    link = storage.presign_link("media", "outputs/clip.mp4", DOWNLOAD_LINK_SECONDS)
    assert _expires_param(link.url) == DOWNLOAD_LINK_SECONDS
    assert abs((link.expires_at - (datetime.now(UTC) + timedelta(days=1))).total_seconds()) < 5


def test_credentials_about_to_end_are_refreshed_first_and_the_link_follows_the_new_ones() -> None:
    # GIVEN role credentials that end in five minutes, whose refresh yields a three-hour session
    refreshed: list[str] = []

    def refresh() -> dict[str, str]:
        refreshed.append("yes")
        return _metadata(timedelta(hours=3), key="ASIAFRESH")

    storage = S3Storage(_client(_RoleSession(_metadata(timedelta(minutes=5)), refresh)))
    # WHEN a link is signed
    link = storage.presign_link("media", "outputs/clip.mp4", DOWNLOAD_LINK_SECONDS)
    # THEN it was signed by the fresh credentials, and lasts as long as they do, not five minutes
    assert refreshed and "ASIAFRESH" in link.url
    assert abs((link.expires_at - (datetime.now(UTC) + timedelta(hours=3))).total_seconds()) < 5


def test_presign_get_is_capped_the_same_way() -> None:
    storage = S3Storage(_client(_RoleSession(_metadata(timedelta(hours=1)), lambda: _metadata(timedelta(hours=1)))))
    assert _expires_param(storage.presign_get("media", "k", DOWNLOAD_LINK_SECONDS)) <= 3600


@pytest.mark.parametrize(
    ("requested", "ends_in", "expected"),
    [
        (86400, None, 86400),
        (86400, timedelta(hours=6), 6 * 3600),
        (600, timedelta(hours=6), 600),
        (30 * 86400, None, SIGV4_MAX_SECONDS),
        (86400, timedelta(seconds=-30), 1),
    ],
)
def test_link_lifetime(requested: int, ends_in: timedelta | None, expected: int) -> None:
    assert link_lifetime_s(requested, NOW, NOW + ends_in if ends_in is not None else None) == expected


def test_credentials_expiry_is_none_for_plain_keys() -> None:
    assert credentials_expiry(Credentials("AKIA", "secret")) is None
    assert credentials_expiry(None) is None


def _policy_expiration(fields: dict[str, str]) -> datetime:
    policy = json.loads(base64.b64decode(fields["policy"]))
    return datetime.fromisoformat(str(policy["expiration"]).replace("Z", "+00:00"))


def test_an_upload_form_signed_by_a_role_session_ends_with_the_session_and_says_so() -> None:
    # GIVEN a client signing with role credentials that end in 20 minutes (their refresh, too)
    storage = S3Storage(
        _client(_RoleSession(_metadata(timedelta(minutes=20)), lambda: _metadata(timedelta(minutes=20))))
    )
    # WHEN an hour's upload form is asked for
    post = storage.presign_post("media", "tenants/t/inputs/j/target.mp4", 3600, 1024, {"retention": "input"})
    # THEN its policy ends with the session, and it says how long it lasts
    session_end = datetime.now(UTC) + timedelta(minutes=20)
    assert abs((_policy_expiration(post.fields) - session_end).total_seconds()) < 5
    assert 1200 - 5 <= post.expires_s <= 1200


def test_an_upload_form_signed_with_long_lived_keys_lasts_what_was_asked() -> None:
    post = S3Storage(_client()).presign_post("media", "k", 3600, 1024, {"retention": "input"})
    assert post.expires_s == 3600
    assert abs((_policy_expiration(post.fields) - (datetime.now(UTC) + timedelta(hours=1))).total_seconds()) < 5


def test_a_download_link_is_answered_as_an_attachment_named_after_the_object() -> None:
    # GIVEN an output whose name a user chose, quotes and non-ASCII included
    storage = S3Storage(_client())
    # WHEN a download link and a plain link are signed
    download = storage.presign_link("media", 'outputs/take "2" é.mp4', DOWNLOAD_LINK_SECONDS, download=True)
    plain = storage.presign_link("media", "outputs/clip.mp4", DOWNLOAD_LINK_SECONDS)
    # THEN S3 is asked to answer the first as an attachment under a safe form of its name (a browser saves it
    # rather than opening its player); the plain link asks nothing of the kind (a page's <video> plays either)
    [disposition] = parse_qs(urlparse(download.url).query)["response-content-disposition"]
    assert disposition == 'attachment; filename="take _2_ _.mp4"'
    assert "response-content-disposition" not in plain.url
