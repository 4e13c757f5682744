"""The tenant page as a static site: its files, the `config.json` beside them, and its content policy.

The same files are served by the local dashboard under `/tenant/` and published to the stack's
dashboard bucket (`fusionfleet dashboard publish`), where CloudFront serves them. Pure: no I/O but
reading the package's own files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from urllib.parse import urlsplit

from fusionfleet.environment.api import ApiEnvironment

HTML = "text/html; charset=utf-8"
JS = "text/javascript; charset=utf-8"
CSS = "text/css; charset=utf-8"
JSON = "application/json"

# Published key → (file in static/, content type). The page refers to /static/… absolutely.
TENANT_FILES: dict[str, tuple[str, str]] = {
    "index.html": ("tenant.html", HTML),
    "static/render.js": ("render.js", JS),
    "static/tenant.js": ("tenant.js", JS),
    "static/preview.js": ("preview.js", JS),
    "static/style.css": ("style.css", CSS),
}
CONFIG_KEY = "config.json"
# The HTML must be revalidated at once (a new publish shows at the next load); scripts and styles a minute.
CACHE_CONTROL = {HTML: "no-cache", JSON: "no-cache", JS: "max-age=60", CSS: "max-age=60"}


@dataclass(frozen=True)
class SiteFile:
    key: str
    body: bytes
    content_type: str

    @property
    def cache_control(self) -> str:
        return CACHE_CONTROL.get(self.content_type, "no-cache")


JOB_SECTION = b"    <!-- job.html -->\n"


def static_file(name: str) -> bytes:
    """One of static/'s files; an HTML page with the job section both pages share (job.html) in place."""
    body = (resources.files("fleetctl.dashboard") / "static" / name).read_bytes()
    if not name.endswith(".html") or JOB_SECTION not in body:
        return body
    shared = (resources.files("fleetctl.dashboard") / "static" / "job.html").read_bytes()
    return body.replace(JOB_SECTION, shared.split(b"\n", 1)[1], 1)


def origin(url: str) -> str:
    """`scheme://host[:port]` of a URL: what CORS and CSP name."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an http(s) URL: {url!r}")
    return f"{parts.scheme}://{parts.netloc}"


def content_policy(api_origins: str) -> str:
    """The page's CSP: its own files, calls to the API (and the bucket a new job's files are uploaded to)
    only. Images and video from data: and blob: URLs (the latest frame; a chosen target played and its
    frames taken before it is sent) and from those origins alone: a test render's pictures and a finished
    job's output, through the API's presigned links to the bucket."""
    return (
        f"default-src 'self'; connect-src 'self' {api_origins}; img-src 'self' data: blob: {api_origins}; "
        f"media-src 'self' blob: {api_origins}; object-src 'none'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )


def site_config(
    api_url: str, issuer: str = "", audience: str = "", tenant_claim: str = ApiEnvironment.tenant_claim
) -> bytes:
    """`config.json`: where the API is, and what a token for it must say (shown to whoever signs in)."""
    value = {"api_url": api_url.rstrip("/"), "issuer": issuer, "audience": audience, "tenant_claim": tenant_claim}
    return json.dumps(value, indent=2).encode()


def with_policy_meta(html: bytes, policy: str) -> bytes:
    """The page with its CSP also in a <meta> tag, naming the exact API origin.

    CloudFront's response-headers policy cannot name the API (the API's CORS names the distribution,
    so the reverse reference would be a cycle); it allows any API Gateway origin of the region, and
    this tag, which browsers enforce together with the header, narrows it to the stack's own API.
    """
    meta = f'<meta http-equiv="Content-Security-Policy" content="{policy}">'.encode()
    marker = b'<meta charset="utf-8">'
    if marker not in html:
        raise ValueError("the page has no <meta charset> to put its policy after")
    return html.replace(marker, marker + b"\n  " + meta, 1)


def upload_origins(api_url: str, media_bucket: str) -> str:
    """Where the page's uploads go: the media bucket's virtual-hosted origins in the API's region and
    partition (`abc.execute-api.eu-west-1.amazonaws.com` → `https://<bucket>.s3.eu-west-1.amazonaws.com`),
    and the global one boto3 signs for us-east-1."""
    host = urlsplit(api_url).netloc
    parts = host.split(".")
    if len(parts) < 4 or parts[1] != "execute-api":
        raise ValueError(f"not an API Gateway URL: {api_url!r}")
    region, suffix = parts[2], ".".join(parts[3:])
    return f"https://{media_bucket}.s3.{region}.{suffix} https://{media_bucket}.s3.{suffix}"


def tenant_site(
    api_url: str, issuer: str = "", audience: str = "", tenant_claim: str = ApiEnvironment.tenant_claim,
    media_bucket: str = "",
) -> list[SiteFile]:  # fmt: skip
    """Every file to publish, the page with its exact policy (the API, and the bucket its uploads go to),
    and `config.json` last."""
    uploads = f" {upload_origins(api_url, media_bucket)}" if media_bucket else ""
    policy = content_policy(origin(api_url) + uploads)
    files = []
    for key, (name, content_type) in TENANT_FILES.items():
        body = static_file(name)
        if content_type == HTML:
            body = with_policy_meta(body, policy)
        files.append(SiteFile(key, body, content_type))
    files.append(SiteFile(CONFIG_KEY, site_config(api_url, issuer, audience, tenant_claim), JSON))
    return files
