"""The tenants' API called as API Gateway calls its Lambda: an HTTP API event (payload 2.0) with the
authorizer's claims, answered by `functions.api.routes.respond` over a `TenantJobs`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from functions.api.routes import respond
from fusionfleet.json_http import http_event
from fusionfleet.services.tenant_jobs import TenantJobs


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    headers: dict[str, str]


def call_api(
    jobs: TenantJobs, method: str, path: str, body: object = None, tenant: str | None = "acme", query: str = ""
) -> Answer:
    """One request by `tenant` (None: a token without a tenant claim)."""
    raw = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    target = f"{path}?{query}" if query else path
    claims = {} if tenant is None else {"tenant": tenant}
    result = respond(http_event(method, target, {"Content-Type": "application/json"}, raw, claims), jobs)
    return Answer(int(result["statusCode"]), json.loads(result["body"]), dict(result["headers"]))
