"""`fusionfleet dashboard publish`: put the tenant page on an AWS stack's dashboard bucket.

Reads the stack's outputs (bucket, API URL, token issuer and audience), builds the files
(`site.tenant_site`) and uploads each with its Content-Type and Cache-Control: the page and
`config.json` are revalidated at every load, so a new publish shows without a CloudFront invalidation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetctl.dashboard.site import SiteFile, tenant_site
from fusionfleet.environment.api import ApiEnvironment
from fusionfleet.errors import FusionFleetError

NEEDED = ("DashboardBucketName", "DashboardUrl", "ApiUrl")


class NoDashboard(FusionFleetError):
    """The stack has no dashboard (a Stage=local stack, or one deployed before it existed)."""


def site_for(outputs: Mapping[str, str]) -> tuple[str, list[SiteFile]]:
    """The bucket and the files to publish for a stack with these outputs. Pure."""
    missing = [name for name in NEEDED if not outputs.get(name)]
    if missing:
        raise NoDashboard(
            f"the stack has no {', '.join(missing)} output: only AWS stages (Stage other than local) have the "
            "tenant dashboard; the local stack serves it from its dashboard process under /tenant/"
        )
    files = tenant_site(
        outputs["ApiUrl"], outputs.get("ApiJwtIssuer", ""), outputs.get("ApiJwtAudience", ""),
        outputs.get("ApiTenantClaim") or ApiEnvironment.tenant_claim, outputs.get("MediaBucketName", ""),
    )  # fmt: skip
    return outputs["DashboardBucketName"], files


def upload(s3: Any, bucket: str, files: list[SiteFile]) -> None:
    """Each file with its content type (S3 would serve them as binary/octet-stream otherwise)."""
    for item in files:
        s3.put_object(
            Bucket=bucket, Key=item.key, Body=item.body, ContentType=item.content_type,
            CacheControl=item.cache_control,
        )  # fmt: skip
