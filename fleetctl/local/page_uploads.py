"""The local bucket's CORS for the tenant page's uploads.

The tenant page (the dashboard's /tenant/) uploads a new job's files straight to the media bucket with
the API's presigned POSTs, from the dashboard's origin: the bucket must answer that origin's CORS
preflight, or the browser refuses the upload. Written at every `local up`, since the dashboard's port
can move.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def allow_page_uploads(s3: S3Client, bucket: str, page_url: str) -> None:
    """Let the page at `page_url` POST forms to `bucket` (and read the answer)."""
    s3.put_bucket_cors(
        Bucket=bucket,
        CORSConfiguration={"CORSRules": [{"AllowedOrigins": [page_url.rstrip("/")], "AllowedMethods": ["POST"],
                                          "AllowedHeaders": ["*"], "MaxAgeSeconds": 600}]},
    )  # fmt: skip
