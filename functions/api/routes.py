"""The HTTP API's routes, on the one JSON layer both APIs share (fusionfleet.json_http):

    POST /jobs                   201 {"job_id", "uploads": [{"name", "key", "url", "fields"}], "expires_in",
                                     "max_upload_bytes"}; each file is an HTML-form POST of `fields` + `file`
    POST /jobs/{job_id}/start    202 {"job_id", "state": "PENDING", ...}
    GET  /jobs/{job_id}          200 {"job_id", "state", "segments": {"done", "failed", "total"}, "ended",
                                      "actions", "reason"?, "download_url"?, "created_at"?, "priority"?,
                                      "frames"?: [{"frame", "download_url"}] (a test render's pictures),
                                      "targets"? (while PENDING: the target's, or a batch's targets', names)}
    GET  /jobs                   200 {"jobs": [...], "now"}   (the caller's own, newest first; ?limit=1..200)
    GET  /jobs/{job_id}/detail   200 {"job": <as GET /jobs/{id}>, "segments", "attempts", "timings", "cost",
                                      "deliveries", "preview": bool, "now"}; a batch's also "items" (a page:
                                      ?items_from=N&items=M, each {"index", "target", "state", "segments",
                                      "output", "download_url"?, "reason"?}) and "next_item"
    GET  /jobs/{job_id}/logs     200 {"job_id", "attempts": [...]}   (?segment=N: one segment's)
    GET  /jobs/{job_id}/preview  200 {"job_id", "image": "data:image/jpeg;base64,..."}, 404 before the first
    POST /jobs/{job_id}/cancel   202 {"job_id", "message"}
    POST /jobs/{job_id}/retry    202 {"job_id", "message"}

A job is the read model's view of it (fusionfleet.jobs.views.tenant_json), actions included. Workers
are not served: they are the operator's fleet, shared by every tenant, and what one renders names
other tenants' jobs.

The token was verified before this runs (API Gateway's JWT authorizer, or the local gateway): here its
claims name the tenant, after the handler's own checks (functions.api.claims). A token refused by
those is 401; one without a valid tenant claim is 403; an unknown job, or another tenant's, is 404
(ids do not reveal whether they exist); a bad body is 400 with every problem; an action the job's
state does not allow is 409.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from functions.api.claims import TokenRules, token_problem
from fusionfleet import layout
from fusionfleet.environment.api import ApiEnvironment
from fusionfleet.jobs.batch_views import DEFAULT_ITEM_PAGE, MAX_ITEM_PAGE
from fusionfleet.jobs.manifest import MAX_TARGETS
from fusionfleet.jobs.reader import DEFAULT_ATTEMPT_PAGE, DEFAULT_SEGMENT_PAGE
from fusionfleet.jobs.views import tenant_json
from fusionfleet.json_http import HttpError, JsonApi, plain, query_value, whole_number
from fusionfleet.services.tenant_jobs import DEFAULT_LIST_LIMIT, TenantJobs

logger = logging.getLogger(__name__)

MAX_LIMIT = 200
MAX_SEGMENT_PAGE = 1000
NO_STORE = {"Cache-Control": "no-store"}


def tenant_of(claims: Mapping[str, Any], claim: str) -> str | None:
    value = claims.get(claim)
    return value if isinstance(value, str) and layout.is_tenant_name(value) else None


def claims_of(event: Mapping[str, Any]) -> dict[str, Any]:
    return dict(event.get("requestContext", {}).get("authorizer", {}).get("jwt", {}).get("claims") or {})


def tenant_api(jobs: TenantJobs, tenant: str, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> JsonApi:
    """The routes, serving `tenant`'s jobs."""
    api = JsonApi(trailing_slash=True, headers=NO_STORE)
    route = api.route

    def now() -> str:
        return clock().isoformat()

    @route("POST", "/jobs")
    def create() -> tuple[dict[str, Any], int]:
        created = jobs.create(tenant, _body(api))
        uploads = [{"name": u.name, "key": u.key, "url": u.url, "fields": u.fields} for u in created.uploads]
        logger.info("tenant %s created job %s", tenant, created.job_id)
        return {"job_id": created.job_id, "uploads": uploads, "expires_in": created.expires_in,
                "max_upload_bytes": created.max_upload_bytes}, 201  # fmt: skip

    @route("GET", "/jobs")
    def listed() -> dict[str, Any]:
        raw = query_value(_query(api), "limit", keep_blank=False)
        limit = whole_number(raw, "limit", 1, MAX_LIMIT) if raw else DEFAULT_LIST_LIMIT
        page, more = jobs.list_page(tenant, limit, query_value(_query(api), "next", keep_blank=False))
        return {"jobs": [tenant_json(view) for view in page], "next": more, "now": now()}

    @route("GET", "/jobs/<job_id>")
    def status(job_id: str) -> dict[str, Any]:
        return tenant_json(jobs.status(tenant, job_id))

    @route("POST", "/jobs/<job_id>/start")
    def start(job_id: str) -> tuple[dict[str, Any], int]:
        logger.info("tenant %s starts job %s", tenant, job_id)
        return tenant_json(jobs.start(tenant, job_id)), 202

    @route("POST", "/jobs/<job_id>/cancel")
    def cancel(job_id: str) -> tuple[dict[str, Any], int]:
        return {"job_id": job_id, "message": jobs.cancel(tenant, job_id)}, 202

    @route("POST", "/jobs/<job_id>/retry")
    def retry(job_id: str) -> tuple[dict[str, Any], int]:
        logger.info("tenant %s retries job %s", tenant, job_id)
        return {"job_id": job_id, "message": jobs.retry(tenant, job_id)}, 202

    @route("GET", "/jobs/<job_id>/detail")
    def detail(job_id: str) -> dict[str, Any]:
        query = _query(api)
        first = _whole(query, "segments_from", 0, 10**7, 0)
        limit = _whole(query, "limit", 1, MAX_SEGMENT_PAGE, DEFAULT_SEGMENT_PAGE)
        found, more = jobs.detail_page(tenant, job_id, first, limit)
        shown = {
            "job": tenant_json(found.job), "segments": plain(found.segments), "next_segment": more,
            "attempts": plain(found.attempts), "timings": plain(found.timings), "cost": plain(found.cost),
            "deliveries": plain(found.deliveries),
            "preview": found.preview_key is not None,
            "now": now(),
        }  # fmt: skip
        items_from = _whole(query, "items_from", 0, MAX_TARGETS, 0)
        items_limit = _whole(query, "items", 1, MAX_ITEM_PAGE, DEFAULT_ITEM_PAGE)
        items = jobs.batch_items(tenant, job_id, items_from, items_limit)
        if items is not None:  # a batch: a page of its items
            shown["items"], shown["next_item"] = items
        return shown

    @route("GET", "/jobs/<job_id>/logs")
    def logs(job_id: str) -> dict[str, Any]:
        query = _query(api)
        segment = _segment(query)
        if segment is not None:
            return {"job_id": job_id, "attempts": plain(jobs.logs(tenant, job_id, segment))}
        limit = _whole(query, "limit", 1, MAX_LIMIT, DEFAULT_ATTEMPT_PAGE)
        page, more = jobs.logs_page(tenant, job_id, limit, query_value(query, "next", keep_blank=False))
        return {"job_id": job_id, "attempts": plain(page), "next": more}

    @route("GET", "/jobs/<job_id>/preview")
    def preview(job_id: str) -> dict[str, Any]:
        image = jobs.preview(tenant, job_id)
        if image is None:
            raise HttpError(404, f"job {job_id} has no preview yet")
        return {"job_id": job_id, "image": image}

    return api


def respond(
    event: Mapping[str, Any], jobs: TenantJobs, tenant_claim: str = ApiEnvironment.tenant_claim,
    rules: TokenRules | None = None, clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> dict[str, Any]:  # fmt: skip
    """One event's answer: the token's own checks, its tenant, then the routes."""
    claims = claims_of(event)
    problem = token_problem(claims, rules or TokenRules())
    refuse = JsonApi(headers=NO_STORE).answer
    if problem is not None:
        return refuse(HttpError(401, problem, (("WWW-Authenticate", 'Bearer error="invalid_token"'),)))
    tenant = tenant_of(claims, tenant_claim)
    if tenant is None:
        return refuse(
            HttpError(403, f"the token has no valid {tenant_claim!r} claim (lowercase letters, digits and '-')")
        )
    return tenant_api(jobs, tenant, clock).resolve(event)


def _query(api: JsonApi) -> str:
    return str(api.app.current_event.get("rawQueryString") or "")


def _body(api: JsonApi) -> bytes:
    """The body as sent (a body that is no UTF-8 is the service's to refuse, with the reason)."""
    event = api.app.current_event
    raw = event.body or ""
    return base64.b64decode(raw) if event.is_base64_encoded else raw.encode()


def _whole(query: str, name: str, low: int, high: int, default: int) -> int:
    raw = query_value(query, name, keep_blank=False)
    return whole_number(raw, name, low, high) if raw else default


def _segment(query: str) -> int | None:
    raw = query_value(query, "segment", keep_blank=False)
    if not raw:
        return None
    if not raw.isdigit():
        raise HttpError(400, f"segment must be a segment's index (a whole number), not {raw[:40]!r}")
    return int(raw)
