"""The dashboard's JSON API, on the one JSON layer both APIs share (fusionfleet.json_http), over a `DashboardSource`:

    GET  /api/jobs?state=S&limit=N      recent jobs (the read model's JobView), newest first, and every state
    GET  /api/jobs/{id}                 one job: its view, segments, attempts, timings, cost, preview URL
    GET  /api/jobs/{id}/preview.jpg     the latest swapped frame (JPEG), 404 while there is none
    GET  /api/workers                   the workers and their heartbeats
    GET  /api/tenants                   tenants: limits, running and waiting jobs, spend this month and budget
    POST /api/jobs/{id}/cancel          {"message": ...}
    POST /api/jobs/{id}/retry           {"message": ...}

Unknown jobs are 404, a known path with the wrong method 405, a bad query 400, an action the job's
state does not allow 409 (with the reason), a stack that does not answer 502. A POST must say
`Content-Type: application/json` (415 otherwise): a plain HTML form on another site cannot send that
without the browser asking first, so no page but the dashboard's own can press its buttons.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aws_lambda_powertools.event_handler import Response as RouteResponse

from fleetctl.dashboard.source import DashboardSource
from fusionfleet.jobs.states import JobState, parse_state
from fusionfleet.jobs.views import view_json
from fusionfleet.json_http import JSON, Headers, HttpError, JsonApi, http_event, json_bytes, query_value, whole_number

# Re-exported: the page's records as JSON values, for the dashboard's callers and tests.
from fusionfleet.json_http import plain as plain  # noqa: PLC0414

DEFAULT_LIMIT = 20
MAX_LIMIT = 200
JPEG = "image/jpeg"


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = JSON
    headers: Headers = ()


def error(status: int, message: str, headers: Headers = ()) -> Response:
    return Response(status, json_bytes(HttpError(status, message, headers).body()), JSON, headers)


def list_query(query: str) -> tuple[JobState | None, int]:
    """`state` and `limit` of GET /api/jobs, checked."""
    raw = query_value(query, "state")
    state = parse_state(raw) if raw else None
    if raw and state is None:
        raise HttpError(400, f"state must be a job state ({', '.join(JobState)}), not {raw[:40]!r}")
    limit = query_value(query, "limit")
    return state, whole_number(limit, "limit", 1, MAX_LIMIT) if limit else DEFAULT_LIMIT


def dashboard_api(source: DashboardSource, now: datetime) -> JsonApi:
    """The routes over `source`; `now` is the server's clock, sent along so the page computes ages from it."""
    api = JsonApi("/api", json_posts=True, reveal=True)
    route = api.route

    @route("GET", "/jobs")
    def jobs() -> dict[str, Any]:
        query = str(api.app.current_event.get("rawQueryString") or "")
        state, limit = list_query(query)
        page, more = source.list_page(state, limit, query_value(query, "next", keep_blank=False) or "")
        views = [view_json(view) for view in page]
        return {"now": now, "state": state, "limit": limit, "jobs": views, "states": list(JobState), "next": more}

    @route("GET", "/workers")
    def workers() -> dict[str, Any]:
        return {"now": now, "workers": source.workers()}

    @route("GET", "/tenants")
    def tenants() -> dict[str, Any]:
        return {"now": now, "tenants": source.tenants()}

    @route("GET", "/jobs/<job_id>")
    def job(job_id: str) -> dict[str, Any]:
        detail = source.job(job_id)
        preview = f"/api/jobs/{job_id}/preview.jpg" if detail.preview_key else None
        return {"now": now, **plain(detail), "job": view_json(detail.job), "preview_url": preview}

    @route("GET", "/jobs/<job_id>/preview.jpg")
    def preview(job_id: str) -> RouteResponse[Any]:
        image = source.preview(job_id)
        if image is None:
            raise HttpError(404, f"job {job_id} has no preview yet")
        return RouteResponse(200, JPEG, image)

    @route("POST", "/jobs/<job_id>/cancel")
    def cancel(job_id: str) -> dict[str, Any]:
        return {"job_id": job_id, "action": "cancel", "message": source.cancel(job_id)}

    @route("POST", "/jobs/<job_id>/retry")
    def retry(job_id: str) -> dict[str, Any]:
        return {"job_id": job_id, "action": "retry", "message": source.retry(job_id)}

    return api


def handle(
    source: DashboardSource, method: str, target: str, headers: Mapping[str, str], body: bytes, now: datetime
) -> Response:
    """Answer one API request (`target`: its path and query)."""
    result = dashboard_api(source, now).resolve(http_event(method, target, headers, body))
    raw = str(result.get("body") or "")
    payload = base64.b64decode(raw) if result.get("isBase64Encoded") else raw.encode()
    answered = {str(name): str(value) for name, value in (result.get("headers") or {}).items()}
    content_type = answered.pop("Content-Type", JSON)
    return Response(int(result["statusCode"]), payload, content_type, tuple(answered.items()))
