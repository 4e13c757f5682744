"""The dashboard's JSON API: one pure function from a request to a response, over a `DashboardSource`.

    GET  /api/jobs?state=S&limit=N      recent jobs (JobSummary), newest first
    GET  /api/jobs/{id}                 one job: summary, segments, attempts, timings, preview URL
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

import logging
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from fleetctl.dashboard.source import DashboardSource, JobNotFound, OperationRefused
from fusionfleet.errors import FusionFleetError
from fusionfleet.json_http import (
    Headers,
    HttpError,
    Router,
    json_bytes,
    method_not_allowed,
    not_found,
    query_value,
    whole_number,
)

# Re-exported: the page's records as JSON values, for the dashboard's callers and tests.
from fusionfleet.json_http import plain as plain  # noqa: PLC0414

logger = logging.getLogger(__name__)

JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
STATE = re.compile(r"[A-Za-z_]{1,20}")
DEFAULT_LIMIT = 20
MAX_LIMIT = 200
JSON = "application/json"
JPEG = "image/jpeg"
ROUTES = Router(
    "/api",
    [
        ("GET", "jobs", "jobs"),
        ("GET", "workers", "workers"),
        ("GET", "tenants", "tenants"),
        ("GET", "jobs/{job_id}", "job"),
        ("GET", "jobs/{job_id}/preview.jpg", "preview"),
        ("POST", "jobs/{job_id}/cancel", "cancel"),
        ("POST", "jobs/{job_id}/retry", "retry"),
    ],
)


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = JSON
    headers: Headers = ()


@dataclass(frozen=True)
class Route:
    name: str  # jobs | job | preview | workers | cancel | retry
    methods: frozenset[str]
    job_id: str | None = None


def json_response(status: int, value: Any, headers: Headers = ()) -> Response:
    return Response(status, json_bytes(plain(value)), JSON, headers)


def error(status: int, message: str, headers: Headers = ()) -> Response:
    return failure(HttpError(status, message, headers))


def failure(problem: HttpError) -> Response:
    return json_response(problem.status, problem.body(), problem.headers)


def route(path: str) -> Route | None:
    """The API route a path names, or None. Job ids are checked here: nothing else reaches the source."""
    found = ROUTES.match(path)
    if found is None:
        return None
    job_id = found.params.get("job_id")
    if job_id is not None:
        job_id = unquote(job_id)
        if not JOB_ID.fullmatch(job_id):
            return None
    (name,) = set(found.names.values())  # one route per path here, whatever its method
    return Route(name, found.methods, job_id)


def list_query(query: str) -> tuple[str | None, int]:
    """`state` and `limit` of GET /api/jobs, checked."""
    state = query_value(query, "state") or None
    if state is not None and not STATE.fullmatch(state):
        raise HttpError(400, f"state must be a job state such as RUNNING, not {state[:40]!r}")
    raw = query_value(query, "limit")
    if not raw:
        return (state.upper() if state else None), DEFAULT_LIMIT
    return (state.upper() if state else None), whole_number(raw, "limit", 1, MAX_LIMIT)


def handle(source: DashboardSource, method: str, path: str, query: str, content_type: str, now: datetime) -> Response:
    """Answer one API request. `now` is the server's clock, sent along so the page computes ages from it."""
    found = route(path)
    if found is None:
        return failure(not_found(path))
    if method not in found.methods:
        return failure(method_not_allowed(method, found.methods))
    if method == "POST" and content_type.split(";", maxsplit=1)[0].strip().lower() != JSON:
        return error(415, f"POST needs Content-Type: {JSON}")
    try:
        return _serve(source, found, query, now)
    except HttpError as problem:
        return failure(problem)
    except JobNotFound:
        return error(404, f"no job {found.job_id}")
    except OperationRefused as problem:
        # An action the job's state does not allow (cancelling an ended job), or a query naming no state.
        return error(409 if method == "POST" else 400, problem.reason)
    except FusionFleetError as problem:
        return error(502, problem.reason)
    except Exception as problem:  # a failed call to the stack must not take the dashboard down
        logger.exception("%s %s failed", method, path)
        return error(502, f"the stack did not answer: {type(problem).__name__}: {problem}")


def _serve(source: DashboardSource, found: Route, query: str, now: datetime) -> Response:
    job_id = found.job_id or ""
    if found.name == "jobs":
        state, limit = list_query(query)
        return json_response(200, {"now": now, "state": state, "limit": limit, "jobs": source.list_jobs(state, limit)})
    if found.name == "workers":
        return json_response(200, {"now": now, "workers": source.workers()})
    if found.name == "tenants":
        return json_response(200, {"now": now, "tenants": source.tenants()})
    if found.name == "job":
        detail = source.job(job_id)
        preview = f"/api/jobs/{job_id}/preview.jpg" if detail.preview_key else None
        return json_response(200, {"now": now, **plain(detail), "preview_url": preview})
    if found.name == "preview":
        image = source.preview(job_id)
        if image is None:
            return error(404, f"job {job_id} has no preview yet")
        return Response(200, image, JPEG)
    action = source.cancel if found.name == "cancel" else source.retry
    return json_response(200, {"job_id": job_id, "action": found.name, "message": action(job_id)})
