"""Object storage: a small protocol and its S3 adapter. SDK errors become domain exceptions here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode
from xml.sax.saxutils import escape

from botocore.exceptions import ClientError

from fusionfleet.adapters.links import PresignedLink, attachment, credentials_expiry, link_expiry, link_lifetime_s
from fusionfleet.errors import DeleteFailed, ObjectMissing, ObjectRefused

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_MISSING = {"404", "NoSuchKey", "NotFound", "NoSuchBucket"}
_REFUSED = {"403", "AccessDenied", "Forbidden"}


@dataclass(frozen=True)
class ObjectInfo:
    bucket: str
    key: str
    size: int
    etag: str
    last_modified: datetime


@dataclass(frozen=True)
class PresignedPost:
    """An HTML-form upload: POST `fields` then the file (form field `file`, last) to `url`."""

    url: str
    fields: dict[str, str]
    # What the form was signed for: at most what was asked, never past the signing credentials' end.
    expires_s: int = 0


def tagging_xml(tags: dict[str, str]) -> str:
    """The `tagging` form field S3 takes on a POST upload."""
    body = "".join(f"<Tag><Key>{escape(k)}</Key><Value>{escape(v)}</Value></Tag>" for k, v in sorted(tags.items()))
    return f"<Tagging><TagSet>{body}</TagSet></Tagging>"


class Storage(Protocol):
    def head(self, bucket: str, key: str) -> ObjectInfo: ...
    def get_bytes(self, bucket: str, key: str) -> bytes: ...
    def get_range(self, bucket: str, key: str, start: int, end: int) -> bytes: ...
    def put_bytes(self, bucket: str, key: str, data: bytes, content_type: str = ...) -> str: ...
    def upload_file(
        self, bucket: str, key: str, path: Path, content_type: str = ..., tags: dict[str, str] | None = None
    ) -> str: ...
    def download_file(self, bucket: str, key: str, path: Path) -> None: ...
    def list_keys(self, bucket: str, prefix: str) -> list[str]: ...
    def latest_change(self, bucket: str, prefix: str) -> datetime | None: ...
    def create(self, bucket: str, key: str, data: bytes, content_type: str = ...) -> bool: ...
    def get_tagged(self, bucket: str, key: str) -> tuple[bytes, str]: ...
    def replace(self, bucket: str, key: str, data: bytes, etag: str, content_type: str = ...) -> bool: ...
    def list_after(self, bucket: str, prefix: str, after: str, max_keys: int) -> list[str]: ...
    def presign_get(self, bucket: str, key: str, expires_s: int) -> str: ...
    def presign_post(
        self, bucket: str, key: str, expires_s: int, max_bytes: int, tags: dict[str, str]
    ) -> PresignedPost: ...
    def presign_link(self, bucket: str, key: str, expires_s: int, download: bool = False) -> PresignedLink: ...
    def delete_prefix(self, bucket: str, prefix: str) -> int: ...


@contextmanager
def _read_errors(bucket: str, key: str) -> Iterator[None]:
    """A read's ClientError as the domain names it: a missing object, or one this role may not read."""
    try:
        yield
    except ClientError as error:
        if _missing(error):
            raise ObjectMissing(f"s3://{bucket}/{key} does not exist") from error
        if _refused(error):
            raise ObjectRefused(f"s3://{bucket}/{key}: access denied") from error
        raise


def _missing(error: ClientError) -> bool:
    return str(error.response.get("Error", {}).get("Code")) in _MISSING


def _refused(error: ClientError) -> bool:
    return str(error.response.get("Error", {}).get("Code")) in _REFUSED


# S3's smallest part (but the last) is 5 MiB and its largest single PUT is 5 GB: outputs of long
# 1080p videos pass that, so files above one part go up in parts.
MIN_PART_BYTES = 5 * 1024 * 1024
DEFAULT_PART_BYTES = 64 * 1024 * 1024


class S3Storage:
    def __init__(self, client: S3Client, part_bytes: int = DEFAULT_PART_BYTES) -> None:
        if part_bytes < MIN_PART_BYTES:
            raise ValueError(f"S3 parts are at least {MIN_PART_BYTES} bytes")
        self._s3 = client
        self._part_bytes = part_bytes

    def head(self, bucket: str, key: str) -> ObjectInfo:
        with _read_errors(bucket, key):
            response = self._s3.head_object(Bucket=bucket, Key=key)
        return ObjectInfo(
            bucket, key, int(response["ContentLength"]), response["ETag"].strip('"'), response["LastModified"]
        )

    def get_bytes(self, bucket: str, key: str) -> bytes:
        with _read_errors(bucket, key):
            return self._s3.get_object(Bucket=bucket, Key=key)["Body"].read()

    def get_range(self, bucket: str, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of an object."""
        if end <= start:
            return b""
        try:
            response = self._s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}")
        except ClientError as error:
            if _missing(error):
                raise ObjectMissing(f"s3://{bucket}/{key} does not exist") from error
            raise
        return response["Body"].read()

    def put_bytes(self, bucket: str, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        response = self._s3.put_object(Bucket=bucket, Key=key, Body=data, ContentType=content_type)
        return response["ETag"].strip('"')

    def upload_file(
        self,
        bucket: str,
        key: str,
        path: Path,
        content_type: str = "application/octet-stream",
        tags: dict[str, str] | None = None,
    ) -> str:
        """One PUT up to a part's size, parts above it; returns the object's ETag either way.

        Tags go on with the object (a lifecycle rule that matches them sees it from its first day).
        """
        extra: dict[str, Any] = {"ContentType": content_type}
        if tags:
            extra["Tagging"] = urlencode(sorted(tags.items()))
        if path.stat().st_size <= self._part_bytes:
            with path.open("rb") as body:
                response = self._s3.put_object(Bucket=bucket, Key=key, Body=body, **extra)
            return response["ETag"].strip('"')
        return self._upload_parts(bucket, key, path, extra)

    def _upload_parts(self, bucket: str, key: str, path: Path, extra: dict[str, Any]) -> str:
        upload_id = self._s3.create_multipart_upload(Bucket=bucket, Key=key, **extra)["UploadId"]
        parts: list[dict[str, Any]] = []
        try:
            with path.open("rb") as body:
                while chunk := body.read(self._part_bytes):
                    number = len(parts) + 1
                    etag = self._s3.upload_part(
                        Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=chunk
                    )["ETag"]
                    parts.append({"PartNumber": number, "ETag": etag})
            response = self._s3.complete_multipart_upload(
                Bucket=bucket,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},  # type: ignore[typeddict-item]
            )
        except BaseException:
            # No half upload left behind (the bucket's lifecycle rule would catch it a day later).
            self._s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
            raise
        return str(response["ETag"]).strip('"')

    def download_file(self, bucket: str, key: str, path: Path) -> None:
        try:
            self._s3.download_file(bucket, key, str(path))
        except ClientError as error:
            if _missing(error):
                raise ObjectMissing(f"s3://{bucket}/{key} does not exist") from error
            raise

    def list_keys(self, bucket: str, prefix: str) -> list[str]:
        keys: list[str] = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(item["Key"] for item in page.get("Contents", []))
        return keys

    def latest_change(self, bucket: str, prefix: str) -> datetime | None:
        """When anything under `prefix` was last written, or None when nothing is there."""
        latest: datetime | None = None
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                if latest is None or item["LastModified"] > latest:
                    latest = item["LastModified"]
        return latest

    def create(self, bucket: str, key: str, data: bytes, content_type: str = "application/json") -> bool:
        """Write `key` only if it does not exist yet (a conditional PUT); False when it already did."""
        try:
            self._s3.put_object(Bucket=bucket, Key=key, Body=data, ContentType=content_type, IfNoneMatch="*")
        except ClientError as error:
            if str(error.response.get("Error", {}).get("Code")) in {"PreconditionFailed", "ConditionalRequestConflict"}:
                return False
            raise
        return True

    def get_tagged(self, bucket: str, key: str) -> tuple[bytes, str]:
        """An object and its ETag, for a later `replace` of exactly this version."""
        with _read_errors(bucket, key):
            response = self._s3.get_object(Bucket=bucket, Key=key)
        return response["Body"].read(), response["ETag"].strip('"')

    def replace(self, bucket: str, key: str, data: bytes, etag: str, content_type: str = "application/json") -> bool:
        """Overwrite `key` only while it is still the version `etag` names (If-Match); False when another
        writer changed it first (or deleted it): the caller reads it again and reapplies its change."""
        try:
            self._s3.put_object(Bucket=bucket, Key=key, Body=data, ContentType=content_type, IfMatch=f'"{etag}"')
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code"))
            if code in {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"} or _missing(error):
                return False
            raise
        return True

    def list_after(self, bucket: str, prefix: str, after: str, max_keys: int) -> list[str]:
        """At most `max_keys` keys under `prefix` that sort after `after` ("": from the first): one request."""
        extra: dict[str, Any] = {"StartAfter": after} if after else {}
        response = self._s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=max_keys, **extra)
        return [item["Key"] for item in response.get("Contents", [])]

    def presign_get(self, bucket: str, key: str, expires_s: int) -> str:
        return self.presign_link(bucket, key, expires_s).url

    def presign_link(self, bucket: str, key: str, expires_s: int, download: bool = False) -> PresignedLink:
        """A GET link for `expires_s`, or less when the signing credentials end sooner, with its true end;
        `download`: S3 answers it as an attachment named after the object (a browser saves it)."""
        credentials = _signing_credentials(self._s3)
        if credentials is not None:
            # What signs the URL; botocore refreshes credentials that are about to end here, so the
            # expiry read next is that of the credentials that sign.
            credentials.get_frozen_credentials()
        now = datetime.now(UTC)
        lifetime = link_lifetime_s(expires_s, now, credentials_expiry(credentials))
        params: dict[str, str] = {"Bucket": bucket, "Key": key}
        if download:
            params["ResponseContentDisposition"] = attachment(key)
        url = self._s3.generate_presigned_url("get_object", Params=params, ExpiresIn=lifetime)
        return PresignedLink(str(url), link_expiry(now, lifetime))

    def presign_post(
        self, bucket: str, key: str, expires_s: int, max_bytes: int, tags: dict[str, str]
    ) -> PresignedPost:
        """A form upload of exactly this key, at most `max_bytes`, carrying exactly `tags`.

        The policy signs the key, the size range and the tagging field: S3 refuses a larger file
        (EntityTooLarge) and a form without these tags (AccessDenied, policy condition failed), so
        every upload carries the tag the lifecycle rule expires it by.
        """
        tagging = tagging_xml(tags)
        # As for a link: a form that outlives the role session that signed it is refused by S3 (the
        # token expired) however long its policy says; botocore refreshes credentials near their end here.
        credentials = _signing_credentials(self._s3)
        if credentials is not None:
            credentials.get_frozen_credentials()
        lifetime = link_lifetime_s(expires_s, datetime.now(UTC), credentials_expiry(credentials))
        post = self._s3.generate_presigned_post(
            bucket,
            key,
            Fields={"tagging": tagging},
            Conditions=[{"tagging": tagging}, ["content-length-range", 0, max_bytes]],
            ExpiresIn=lifetime,
        )
        return PresignedPost(str(post["url"]), {str(k): str(v) for k, v in post["fields"].items()}, lifetime)

    def delete_prefix(self, bucket: str, prefix: str) -> int:
        """Delete every object under `prefix`; DeleteFailed naming each key S3 would not delete.

        DeleteObjects answers 200 even when it deleted nothing: refusals (AccessDenied, an object
        lock) come back per key under `Errors`, and Quiet mode lists only those.
        """
        keys = self.list_keys(bucket, prefix)
        failures: list[tuple[str, str, str]] = []
        for start in range(0, len(keys), 1000):
            batch = [{"Key": key} for key in keys[start : start + 1000]]
            response = self._s3.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})  # type: ignore[typeddict-item]
            failures.extend(
                (str(error.get("Key", "?")), str(error.get("Code", "?")), str(error.get("Message", "")))
                for error in response.get("Errors", [])
            )
        if failures:
            raise DeleteFailed(bucket, failures)
        return len(keys)


def _signing_credentials(client: Any) -> Any:
    """The credentials a boto3 client signs with (botocore's private accessor; None if it moves)."""
    accessor = getattr(client, "_get_credentials", None)
    return accessor() if callable(accessor) else None


def get_json(storage: Storage, bucket: str, key: str) -> Any:
    return json.loads(storage.get_bytes(bucket, key))


def put_json(storage: Storage, bucket: str, key: str, value: Any) -> str:
    return storage.put_bytes(bucket, key, json.dumps(value, sort_keys=True).encode(), "application/json")


class S3RangeSource:
    """A RangeSource over one S3 object (size known from a HEAD), for RangeReader."""

    def __init__(self, storage: Storage, bucket: str, key: str, size: int) -> None:
        self._storage = storage
        self._bucket = bucket
        self._key = key
        self._size = size

    @property
    def size(self) -> int:
        return self._size

    def read_range(self, start: int, end: int) -> bytes:
        return self._storage.get_range(self._bucket, self._key, start, end)
