"""Job identity: derived from the manifest object, so the same manifest is always the same job."""

from __future__ import annotations

import hashlib
import re

from fusionfleet.key_rules import slug
from fusionfleet.layout import manifest_name, tenant_of

JOB_ID_HASH_CHARS = 16
JOB_ID_CHARS = 80  # a Step Functions execution name's limit
# What a job id in an API's path may be, the one pattern both APIs check: the pipeline's ids (a tenant,
# `_`, a slug and a hash), the tenant API's (`YYYYMMDD-HHMMSS-<hex>`) and the names of manifests
# dropped under a tenant's `jobs/`. No `/` and no leading dot: a key built from it stays in its folder.
JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# Separates a tenant's name from the rest of its job ids: neither tenant names nor slugs contain it.
TENANT_SEPARATOR = "_"
# A batch's item is the job `<batch id>.<index>`: neither slugs nor hashes contain a dot.
ITEM_SEPARATOR = "."
ITEM_DIGITS = 4  # up to 10 000 items; a manifest names at most fusionfleet.jobs.manifest.MAX_TARGETS
_ITEM = re.compile(rf"^(?P<batch>[^.]+)\.(?P<index>\d{{{ITEM_DIGITS}}})$")


def job_id(bucket: str, key: str, etag: str, reserve: int = 0) -> str:
    """`<readable name>-<hash of bucket, key and content ETag>`; a valid Step Functions execution name.

    The ETag (not the version) is used so that uploading the same manifest again is the same job,
    while a changed manifest under the same key is a new one.
    A tenant's job ids start with `<tenant>_`, so its jobs are found (and counted) by name alone.
    """
    digest = hashlib.sha256(f"{bucket}\n{key}\n{etag.strip(chr(34))}".encode()).hexdigest()
    tenant = tenant_of(key)
    head = f"{tenant}{TENANT_SEPARATOR}" if tenant else ""
    room = JOB_ID_CHARS - reserve - len(head) - JOB_ID_HASH_CHARS - 1
    return f"{head}{slug(manifest_name(key), room)}-{digest[:JOB_ID_HASH_CHARS]}"


def batch_id(bucket: str, key: str, etag: str) -> str:
    """A batch's id: a job id (the same manifest is the same batch) leaving room for its items' suffix."""
    return job_id(bucket, key, etag, reserve=len(ITEM_SEPARATOR) + ITEM_DIGITS)


def item_id(batch: str, index: int) -> str:
    """The job id of item `index` of a batch: `<batch id>.0007`."""
    return f"{batch}{ITEM_SEPARATOR}{index:0{ITEM_DIGITS}d}"


def batch_of_item(job: str) -> tuple[str, int] | None:
    """(batch id, index) of an item's job id, None for a job of its own."""
    match = _ITEM.match(job)
    return (match["batch"], int(match["index"])) if match else None


def tenant_of_job(job_id: str) -> str | None:
    """`acme_alice-…` → `acme`; None for a single-tenant job."""
    tenant, separator, _ = job_id.partition(TENANT_SEPARATOR)
    return tenant if separator else None


def name_of_job(job_id: str) -> str:
    """The slug of the manifest's name in a job id (`acme_alice-<hash>` → `alice`)."""
    _tenant, _separator, rest = job_id.rpartition(TENANT_SEPARATOR)
    return rest[: -(JOB_ID_HASH_CHARS + 1)] if len(rest) > JOB_ID_HASH_CHARS else rest
