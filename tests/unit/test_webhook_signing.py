"""Standard Webhooks signatures, judged by the specification's own library (`standardwebhooks` from PyPI)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from fusionfleet.webhooks.signing import BadSecret, WebhookSecret, signed_headers


def test_a_signed_request_verifies_with_the_standard_library() -> None:
    # GIVEN a tenant's secret as the farm keeps it
    secret = WebhookSecret.generate()
    body = b'{"type":"job.succeeded","data":{"job_id":"acme_a-1"}}'
    now = int(time.time())
    # WHEN the farm signs one attempt
    headers = signed_headers(secret, "acme_a-1.r0.succeeded", now, body)
    # THEN the library verifies it with the secret's text form and returns the payload
    assert Webhook(str(secret)).verify(body, headers) == {"type": "job.succeeded", "data": {"job_id": "acme_a-1"}}
    assert headers["webhook-id"] == "acme_a-1.r0.succeeded"
    assert headers["webhook-timestamp"] == str(now)
    assert headers["webhook-signature"].startswith("v1,")


def test_the_signature_matches_the_librarys_own_for_the_same_inputs() -> None:
    secret = WebhookSecret.parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    body = b'{"test": 2432232314}'
    ours = signed_headers(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)["webhook-signature"]
    theirs = Webhook(str(secret)).sign("msg_p5jXN8AQM9LWM0D4loKWxJek", datetime.fromtimestamp(1614265330, UTC), body)
    assert ours == theirs


@pytest.mark.parametrize("change", ["body", "id", "timestamp", "secret"])
def test_anything_changed_fails_verification(change: str) -> None:
    secret = WebhookSecret.generate()
    body = b'{"a":1}'
    now = int(time.time())
    headers = signed_headers(secret, "e1", now, body)
    if change == "body":
        body = b'{"a":2}'
    elif change == "id":
        headers["webhook-id"] = "e2"
    elif change == "timestamp":
        headers["webhook-timestamp"] = str(now - 1)
    else:
        secret = WebhookSecret.generate()
    with pytest.raises(WebhookVerificationError):
        Webhook(str(secret)).verify(body, headers)


def test_a_secret_round_trips_through_its_text_and_never_shows_in_repr() -> None:
    secret = WebhookSecret.generate()
    assert WebhookSecret.parse(str(secret)) == secret
    assert str(secret).startswith("whsec_")
    assert str(secret) not in repr(secret)


@pytest.mark.parametrize("text", ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_!!!", "whsec_c2hvcnQ="])
def test_a_malformed_secret_is_refused_with_the_reason(text: str) -> None:
    with pytest.raises(BadSecret):
        WebhookSecret.parse(text)


def test_an_id_with_a_space_or_comma_is_refused() -> None:
    with pytest.raises(ValueError, match="webhook id"):
        signed_headers(WebhookSecret.generate(), "a b", 1, b"")
