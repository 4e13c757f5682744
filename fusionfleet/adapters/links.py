"""Presigned download links, and how long one really lasts.

A SigV4 presigned URL is valid for its X-Amz-Expires *and* only while the credentials that signed
it are: signed with a role session (an ECS task role, a Lambda, SSO) it dies when that session
ends, hours before a promised 24 h. So a link's lifetime is the earlier of the two, and the notice
says that instant; `fusionfleet status JOB` signs a fresh one whenever it is asked.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

DOWNLOAD_LINK_SECONDS = 24 * 3600  # what a notice's link asks for
SIGV4_MAX_SECONDS = 7 * 24 * 3600  # S3 refuses presigned URLs that ask for longer


@dataclass(frozen=True)
class PresignedLink:
    url: str
    expires_at: datetime  # UTC: the earlier of the asked lifetime and the signing credentials' end

    @property
    def expires_at_iso(self) -> str:
        return self.expires_at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def link_lifetime_s(requested_s: int, now: datetime, credentials_expiry: datetime | None) -> int:
    """Seconds a link signed at `now` stays valid: at most `requested_s` (and SigV4's 7 days), never
    past `credentials_expiry` (None: long-lived keys, which do not end), and at least 1."""
    lifetime = min(max(1, requested_s), SIGV4_MAX_SECONDS)
    if credentials_expiry is not None:
        lifetime = min(lifetime, int((credentials_expiry - now).total_seconds()))
    return max(1, lifetime)


def attachment(key: str) -> str:
    """The Content-Disposition S3 answers a download link with: saved under the object's own name, not opened
    in the browser's player (a page's `download` attribute is ignored across origins). Quotes, control and
    non-ASCII characters become `_`, so the header stays one plain token whatever the user named the file."""
    name = re.sub(r"[^A-Za-z0-9._ ()+-]", "_", posixpath.basename(key)) or "output"
    return f'attachment; filename="{name}"'


def link_expiry(now: datetime, lifetime_s: int) -> datetime:
    return now + timedelta(seconds=lifetime_s)


def credentials_expiry(credentials: object | None) -> datetime | None:
    """When botocore credentials end; None for long-lived keys or when unknown.

    botocore keeps a temporary session's end in RefreshableCredentials._expiry_time and offers no
    public accessor; read it here, in one place.
    """
    expiry = getattr(credentials, "_expiry_time", None)
    if not isinstance(expiry, datetime):
        return None
    return expiry if expiry.tzinfo is not None else expiry.replace(tzinfo=UTC)
