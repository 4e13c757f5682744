"""Standard Webhooks signatures (https://www.standardwebhooks.com): a `whsec_` secret per tenant.

The signed content is `<webhook-id>.<webhook-timestamp>.<body>`, HMAC-SHA256 with the secret's key,
sent as `v1,<base64>` in `webhook-signature`. Receivers verify with any Standard Webhooks library;
the tests use the `standardwebhooks` package from PyPI as the judge.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from fusionfleet.errors import FusionFleetError

SECRET_PREFIX = "whsec_"
# The specification asks for 24 to 64 random bytes; 32 is what HMAC-SHA256 uses in full.
SECRET_BYTES = 32
SIGNATURE_VERSION = "v1"
HEADER_ID = "webhook-id"
HEADER_TIMESTAMP = "webhook-timestamp"
HEADER_SIGNATURE = "webhook-signature"


class BadSecret(FusionFleetError):
    """A stored webhook secret is not `whsec_` followed by base64 of 24 to 64 bytes."""


@dataclass(frozen=True)
class WebhookSecret:
    key: bytes

    def __post_init__(self) -> None:
        if not 24 <= len(self.key) <= 64:
            raise BadSecret(f"a webhook secret holds 24 to 64 bytes, not {len(self.key)}")

    @classmethod
    def generate(cls) -> WebhookSecret:
        return cls(secrets.token_bytes(SECRET_BYTES))

    @classmethod
    def parse(cls, text: str) -> WebhookSecret:
        if not text.startswith(SECRET_PREFIX):
            raise BadSecret(f"a webhook secret starts with {SECRET_PREFIX!r}")
        try:
            key = base64.b64decode(text[len(SECRET_PREFIX) :], validate=True)
        except (binascii.Error, ValueError) as error:
            raise BadSecret(f"a webhook secret is {SECRET_PREFIX!r} and base64: {error}") from error
        return cls(key)

    def __str__(self) -> str:
        return SECRET_PREFIX + base64.b64encode(self.key).decode("ascii")

    def __repr__(self) -> str:
        return "WebhookSecret(…)"  # never in a log line


def signature(secret: WebhookSecret, message_id: str, timestamp: int, body: bytes) -> str:
    """`v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`. Pure."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret.key, signed, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def signed_headers(secret: WebhookSecret, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers for one attempt: the id stays, the timestamp is the attempt's."""
    if any(ch in message_id for ch in " ,\r\n") or not message_id:
        raise ValueError(f"a webhook id cannot be empty or hold spaces, commas or line breaks: {message_id!r}")
    return {
        HEADER_ID: message_id,
        HEADER_TIMESTAMP: str(timestamp),
        HEADER_SIGNATURE: signature(secret, message_id, timestamp, body),
    }
