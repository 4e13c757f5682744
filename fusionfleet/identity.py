"""Job identity: derived from the manifest object, so the same manifest is always the same job."""

from __future__ import annotations

import hashlib

from fusionfleet.layout import manifest_name, slug

JOB_ID_HASH_CHARS = 16


def job_id(bucket: str, key: str, etag: str) -> str:
    """`<readable name>-<hash of bucket, key and content ETag>`; a valid Step Functions execution name.

    The ETag (not the version) is used so that uploading the same manifest again is the same job,
    while a changed manifest under the same key is a new one.
    """
    digest = hashlib.sha256(f"{bucket}\n{key}\n{etag.strip(chr(34))}".encode()).hexdigest()
    return f"{slug(manifest_name(key), 80 - JOB_ID_HASH_CHARS - 1)}-{digest[:JOB_ID_HASH_CHARS]}"
