"""The dashboard's JSON API: one pure function from a request to a response, over a `DashboardSource`.

    GET  /api/jobs?state=S&limit=N      recent jobs (JobSummary), newest first
    GET  /api/jobs/{id}                 one job: summary, segments, attempts, timings, preview URL
    GET  /api/jobs/{id}/preview.jpg     the latest swapped frame (JPEG), 404 while there is none
    GET  /api/workers                   the workers and their heartbeats
    POST /api/jobs/{id}/cancel          {"message": ...}
    POST /api/jobs/{id}/retry           {"message": ...}

Unknown jobs are 404, a known path with the wrong method 405, a bad query 400, an action the job's
state does not allow 409 (with the reason), a stack that does not answer 502. A POST must say
`Content-Type: application/json` (415 otherwise): a plain HTML form on another site cannot send that
without the browser asking first, so no page but the dashboard's own can press its buttons.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, unquote

from fleetctl.dashboard.source import DashboardSource, JobNotFound, OperationRefused
from fusionfleet.errors import FusionFleetError

logger = logging.getLogger(__name__)

JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
STATE = re.compile(r"[A-Za-z_]{1,20}")
DEFAULT_LIMIT = 20
MAX_LIMIT = 200
JSON = "application/json"
JPEG = "image/jpeg"


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Route:
    name: str  # jobs | job | preview | workers | cancel | retry
    methods: frozenset[str]
    job_id: str | None = None


class BadRequest(ValueError):
    """The query cannot be served; the message says why."""


def plain(value: Any) -> Any:
    """Dataclasses, datetimes and containers as JSON values (any field a record grows is shown too)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_response(status: int, value: Any, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    return Response(status, json.dumps(plain(value), separators=(",", ":")).encode(), JSON, headers)


def error(status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    return json_response(status, {"error": message}, headers)


def route(path: str) -> Route | None:
    """The API route a path names, or None. Job ids are checked here: nothing else reaches the source."""
    parts = path.split("/")
    if parts[:2] != ["", "api"]:
        return None
    rest = parts[2:]
    if rest == ["jobs"]:
        return Route("jobs", frozenset({"GET"}))
    if rest == ["workers"]:
        return Route("workers", frozenset({"GET"}))
    if len(rest) < 2 or rest[0] != "jobs":
        return None
    job_id = unquote(rest[1])
    if not JOB_ID.fullmatch(job_id):
        return None
    if len(rest) == 2:
        return Route("job", frozenset({"GET"}), job_id)
    if len(rest) == 3 and rest[2] == "preview.jpg":
        return Route("preview", frozenset({"GET"}), job_id)
    if len(rest) == 3 and rest[2] in ("cancel", "retry"):
        return Route(rest[2], frozenset({"POST"}), job_id)
    return None


def list_query(query: str) -> tuple[str | None, int]:
    """`state` and `limit` of GET /api/jobs, checked."""
    values = parse_qs(query, keep_blank_values=True)
    state = (values.get("state") or [""])[-1].strip() or None
    if state is not None and not STATE.fullmatch(state):
        raise BadRequest(f"state must be a job state such as RUNNING, not {state[:40]!r}")
    raw = (values.get("limit") or [""])[-1].strip()
    if not raw:
        return (state.upper() if state else None), DEFAULT_LIMIT
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise BadRequest(f"limit must be a whole number from 1 to {MAX_LIMIT}, not {raw[:40]!r}")
    return (state.upper() if state else None), int(raw)


def handle(source: DashboardSource, method: str, path: str, query: str, content_type: str, now: datetime) -> Response:
    """Answer one API request. `now` is the server's clock, sent along so the page computes ages from it."""
    found = route(path)
    if found is None:
        return error(404, f"no such resource: {path[:200]}")
    if method not in found.methods:
        allow = ", ".join(sorted(found.methods))
        return error(405, f"{method} is not allowed here (allowed: {allow})", (("Allow", allow),))
    if method == "POST" and content_type.split(";", maxsplit=1)[0].strip().lower() != JSON:
        return error(415, f"POST needs Content-Type: {JSON}")
    try:
        return _serve(source, found, query, now)
    except BadRequest as problem:
        return error(400, str(problem))
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
