"""What a key in the buckets may be (any media, manifest or output key a user names), and names made
safe for AWS's restricted ones. Pure."""

from __future__ import annotations

import posixpath
import re
import unicodedata

_UNSAFE = re.compile(r"[\x00-\x1f\x7f\\]")


def key_problem(key: str, allowed_prefixes: tuple[str, ...], forbidden_prefixes: tuple[str, ...]) -> str | None:
    """Why `key` may not be used as a media or output key, or None when it is fine.

    Keys are S3 keys, not paths, but they become file names in downloads and tools: anything that
    could climb out of its prefix (`..`, leading `/`, backslashes) is refused outright.
    """
    if not key:
        return "is empty"
    if len(key.encode("utf-8")) > 1024:
        return "is longer than 1024 bytes"
    if _UNSAFE.search(key):
        return "contains control characters or backslashes"
    if key.startswith("/"):
        return "starts with '/'"
    parts = key.split("/")
    if any(part in ("", ".", "..") for part in parts[:-1]) or parts[-1] in ("", ".", ".."):
        return "contains empty, '.' or '..' path segments"
    if posixpath.normpath(key) != key:
        return "is not a normalised key"
    if any(key.startswith(prefix) for prefix in forbidden_prefixes):
        return f"is under a reserved prefix ({', '.join(forbidden_prefixes)})"
    if allowed_prefixes and not any(key.startswith(prefix) for prefix in allowed_prefixes):
        return f"is outside the allowed prefixes ({', '.join(allowed_prefixes)})"
    return None


def slug(text: str, limit: int) -> str:
    """A lowercase [a-z0-9-] rendering of `text` for names that AWS restricts."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    cleaned = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return cleaned[:limit].strip("-") or "job"
