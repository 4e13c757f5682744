"""The HTTP API's routes: one function from an authenticated request to a response.

    POST /jobs                   201 {"job_id", "uploads": [{"name", "key", "url", "fields"}], "expires_in",
                                     "max_upload_bytes"}; each file is an HTML-form POST of `fields` + `file`
    POST /jobs/{job_id}/start    202 {"job_id", "state": "PENDING", ...}
    GET  /jobs/{job_id}          200 {"job_id", "state", "segments": {"done", "failed", "total"}, "reason"?,
                                      "download_url"?}
    GET  /jobs                   200 {"jobs": [...], "now"}   (the caller's own, newest first; ?limit=1..200)
    GET  /jobs/{job_id}/detail   200 {"job": <as GET /jobs/{id}>, "segments", "attempts", "timings", "cost",
                                      "preview": bool, "now"}
    GET  /jobs/{job_id}/logs     200 {"job_id", "attempts": [...]}   (?segment=N: one segment's)
    GET  /jobs/{job_id}/preview  200 {"job_id", "image": "data:image/jpeg;base64,..."}, 404 before the first
    POST /jobs/{job_id}/cancel   202 {"job_id", "message"}
    POST /jobs/{job_id}/retry    202 {"job_id", "message"}

Workers are not served: they are the operator's fleet, shared by every tenant, and what one renders
names other tenants' jobs.

The token was verified before this runs (API Gateway's JWT authorizer, or the local gateway): here
its claims only name the tenant. A token without a valid tenant claim is 403; an unknown job, or
another tenant's, is 404 (ids do not reveal whether they exist); a bad body is 400 with every
problem; an action the job's state does not allow is 409.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fusionfleet import layout
from fusionfleet.errors import JobNotFound, OperationRefused
from fusionfleet.jobs.views import tenant_json
from fusionfleet.json_http import (
    HttpError,
    Router,
    json_bytes,
    method_not_allowed,
    not_found,
    plain,
    query_value,
    whole_number,
)
from fusionfleet.services.tenant_jobs import DEFAULT_LIST_LIMIT, JOB_ID, BadBody, TenantJobs

logger = logging.getLogger(__name__)

MAX_LIMIT = 200
ROUTES = Router(
    "/",
    [
        ("GET", "jobs", "list"),
        ("POST", "jobs", "create"),
        ("GET", "jobs/{job_id}", "status"),
        ("POST", "jobs/{job_id}/start", "start"),
        ("POST", "jobs/{job_id}/cancel", "cancel"),
        ("POST", "jobs/{job_id}/retry", "retry"),
        ("GET", "jobs/{job_id}/detail", "detail"),
        ("GET", "jobs/{job_id}/logs", "logs"),
        ("GET", "jobs/{job_id}/preview", "preview"),
    ],
    trailing_slash=True,
)


@dataclass(frozen=True)
class ApiRequest:
    method: str
    path: str
    claims: Mapping[str, Any]
    body: bytes = b""
    query: str = ""


@dataclass(frozen=True)
class ApiResponse:
    status: int
    body: dict[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)

    def encoded(self) -> bytes:
        return json_bytes(self.body)


def error(status: int, message: str, **extra: Any) -> ApiResponse:
    return failure(HttpError(status, message, **extra))


def failure(problem: HttpError) -> ApiResponse:
    return ApiResponse(problem.status, problem.body(), dict(problem.headers))


def tenant_of(claims: Mapping[str, Any], claim: str) -> str | None:
    value = claims.get(claim)
    return value if isinstance(value, str) and layout.is_tenant_name(value) else None


def handle(
    request: ApiRequest, jobs: TenantJobs, tenant_claim: str = "tenant",
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> ApiResponse:  # fmt: skip
    tenant = tenant_of(request.claims, tenant_claim)
    if tenant is None:
        return error(403, f"the token has no valid {tenant_claim!r} claim (lowercase letters, digits and '-')")
    found = ROUTES.match(request.path)
    if found is None:
        return failure(not_found(request.path))
    if request.method not in found.methods:
        return failure(method_not_allowed(request.method, found.methods, name_allowed=False))
    job_id = found.params.get("job_id")
    if job_id is not None and not JOB_ID.fullmatch(job_id):
        return error(404, f"no job {job_id[:80]}")
    try:
        return _serve(request, jobs, tenant, found.names[request.method], job_id or "", clock().isoformat())
    except HttpError as problem:
        return failure(problem)
    except BadBody as bad:
        return error(400, "the job is invalid", problems=list(bad.problems))
    except JobNotFound:
        return error(404, f"no job {job_id}")
    except OperationRefused as refused:
        return error(409, refused.reason)


def _serve(request: ApiRequest, jobs: TenantJobs, tenant: str, name: str, job_id: str, now: str) -> ApiResponse:
    if name == "create":
        created = jobs.create(tenant, request.body)
        uploads = [{"name": u.name, "key": u.key, "url": u.url, "fields": u.fields} for u in created.uploads]
        logger.info("tenant %s created job %s", tenant, created.job_id)
        answer = {"job_id": created.job_id, "uploads": uploads, "expires_in": created.expires_in,
                  "max_upload_bytes": created.max_upload_bytes}  # fmt: skip
        return ApiResponse(201, answer)
    if name == "list":
        raw = query_value(request.query, "limit", keep_blank=False)
        limit = whole_number(raw, "limit", 1, MAX_LIMIT) if raw else DEFAULT_LIST_LIMIT
        return ApiResponse(200, {"jobs": [tenant_json(view) for view in jobs.list_jobs(tenant, limit)], "now": now})
    if name == "start":
        logger.info("tenant %s starts job %s", tenant, job_id)
        return ApiResponse(202, tenant_json(jobs.start(tenant, job_id)))
    if name == "cancel":
        return ApiResponse(202, {"job_id": job_id, "message": jobs.cancel(tenant, job_id)})
    if name == "retry":
        logger.info("tenant %s retries job %s", tenant, job_id)
        return ApiResponse(202, {"job_id": job_id, "message": jobs.retry(tenant, job_id)})
    if name == "detail":
        detail = jobs.detail(tenant, job_id)
        return ApiResponse(200, {
            "job": tenant_json(detail.job), "segments": plain(detail.segments), "attempts": plain(detail.attempts),
            "timings": plain(detail.timings), "cost": plain(detail.cost), "preview": detail.preview_key is not None,
            "now": now,
        })  # fmt: skip
    if name == "logs":
        attempts = plain(jobs.logs(tenant, job_id, _segment(request.query)))
        return ApiResponse(200, {"job_id": job_id, "attempts": attempts})
    if name == "preview":
        image = jobs.preview(tenant, job_id)
        if image is None:
            return error(404, f"job {job_id} has no preview yet")
        return ApiResponse(200, {"job_id": job_id, "image": image})
    return ApiResponse(200, tenant_json(jobs.status(tenant, job_id)))


def _segment(query: str) -> int | None:
    raw = query_value(query, "segment", keep_blank=False)
    if not raw:
        return None
    if not raw.isdigit():
        raise HttpError(400, f"segment must be a segment's index (a whole number), not {raw[:40]!r}")
    return int(raw)
