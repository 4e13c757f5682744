"""JSON over HTTP, the one layer both APIs share: dispatch, the error mapping, job ids, JSON bodies.

Dispatch is Powertools' event handler (`APIGatewayHttpResolver`): routes are decorated functions over
API Gateway's HTTP API events (payload 2.0). The tenants' API (functions/api) resolves the events API
Gateway hands its Lambda; the operator's dashboard (fleetctl/dashboard) turns each request of its
local server into the same kind of event (`http_event`) and resolves it the same way. `JsonApi` adds
what both APIs answer alike:

- errors as `{"error": ...}` with a status, from one mapping of the domain's exceptions (an unknown job
  404, a bad body 400 with its problems, an action the job's state does not allow 409, the farm not
  answering 502);
- a path that names nothing 404, and a known path asked with another method 405 with `Allow`;
- path parameters unquoted, and a job id checked against the one pattern of job ids (`JOB_ID`);
- with `validate`, Powertools' OpenAPI validation: the query parameters a route declares
  (`Annotated[int, Query(ge=1)]`) are checked and typed before it runs (a bad one is 400, naming what
  it must be), its answer is checked against its return model, and `app.get_openapi_schema()` describes
  every route from the same declarations.

Powertools keeps the request being resolved on a class attribute (`BaseRouter.current_event`), so
resolving is serialised in this process: the local servers answer from several threads.
"""

from __future__ import annotations

import base64
import dataclasses
import inspect
import json
import logging
import math
import re
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar, cast
from urllib.parse import parse_qs, unquote, urlsplit

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from fusionfleet.errors import BadRequest, FusionFleetError, JobNotFound, OperationRefused
from fusionfleet.jobs.ids import JOB_ID

__all__ = ["JOB_ID", "JSON", "HttpError", "JsonApi", "http_event", "json_bytes", "plain", "query_value", "whole_number"]

logger = logging.getLogger(__name__)

JSON = "application/json"
Headers = tuple[tuple[str, str], ...]
Handler = TypeVar("Handler", bound=Callable[..., Any])
# The parameter Powertools reads as a path's segment (`/jobs/<job_id>`).
_PARAMETER = re.compile(r"<(\w+)>")
_RESOLVING = threading.Lock()


class HttpError(Exception):
    """A request answered with an error: its status, the message of `{"error": ...}`, any fields beside
    it (a list of problems) and headers (`Allow`)."""

    def __init__(self, status: int, message: str, headers: Headers = (), **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": self.message, **self.extra}


@dataclass(frozen=True)
class _Context:
    """The attributes Powertools reads of a Lambda context, for requests that come from no Lambda."""

    function_name: str = "local"
    aws_request_id: str = ""
    memory_limit_in_mb: int = 0
    invoked_function_arn: str = ""


class JsonApi:
    """One JSON API on Powertools' resolver, with the routes, errors and checks both APIs share.

    `prefix`: where the API's paths start (`/api` for the dashboard's); `trailing_slash`: whether
    `/jobs/` names what `/jobs` does; `json_posts`: a POST must say `Content-Type: application/json`
    (a plain HTML form on another site cannot, without the browser asking first); `reveal`: an
    unexpected error's message is shown (to the operator) or only its kind (to a tenant); `headers`:
    sent with every answer.
    """

    def __init__(
        self, prefix: str = "", *, trailing_slash: bool = False, json_posts: bool = False, reveal: bool = False,
        headers: Mapping[str, str] | None = None, validate: bool = False,
    ) -> None:  # fmt: skip
        self.app = APIGatewayHttpResolver(
            strip_prefixes=[prefix] if prefix else None, serializer=_serialize, enable_validation=validate
        )
        self._validate = validate
        self._prefix = prefix
        self._trailing_slash = trailing_slash
        self._json_posts = json_posts
        self._reveal = reveal
        self._headers = dict(headers or {})
        self._routes: list[tuple[str, re.Pattern[str]]] = []
        self.app.not_found(self._not_found)
        self.app.exception_handler(Exception)(self._error)

    def route(self, method: str, path: str, **described: Any) -> Callable[[Handler], Handler]:
        """Registers `function` for `method` and `path` (`/jobs/<job_id>`); it gets the path's parameters
        unquoted, a job id already checked. `described`: Powertools' route arguments for the API's
        document (`status_code`, `responses`, `summary`, ...)."""
        path_names = set(_PARAMETER.findall(path))

        def register(function: Handler) -> Handler:
            def serve(**params: Any) -> Any:
                values = {name: unquote(raw) if name in path_names else raw for name, raw in params.items()}
                job_id = values.get("job_id")
                if job_id is not None:
                    self.app.context["job_id"] = job_id  # for the error mapping (cleared after each request)
                    if not JOB_ID.fullmatch(job_id):
                        raise HttpError(404, f"no job {job_id[:80]}")
                if method == "POST" and self._json_posts and not self._sends_json():
                    raise HttpError(415, f"POST needs Content-Type: {JSON}")
                return function(**values)

            if self._validate:
                # Powertools reads the route's parameters and answer from its signature: the function's,
                # its annotations resolved where it was written.
                serve.__signature__ = inspect.signature(function, eval_str=True)  # type: ignore[attr-defined]
                serve.__name__ = function.__name__
                described.setdefault("operation_id", function.__name__)  # a generated client's method name
                serve.__doc__ = function.__doc__
                if function.__doc__:
                    described.setdefault("summary", function.__doc__.strip().splitlines()[0])
            self.app.route(path, method=[method], **described)(serve)
            pattern = _PARAMETER.sub(r"(?P<\1>[^/]+)", re.escape(path).replace(r"\<", "<").replace(r"\>", ">"))
            self._routes.append((method, re.compile(f"^{pattern}$")))
            return function

        return register

    def resolve(self, event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
        """The answer to one event, as API Gateway expects it back (statusCode, headers, body)."""
        if self._trailing_slash:
            event = _without_trailing_slash(event)
        path = str(event.get("rawPath") or "/")
        if self._prefix and not (path == self._prefix or path.startswith(self._prefix + "/")):
            return self.answer(HttpError(404, f"no such resource: {path[:200]}"))  # not this API's
        with _RESOLVING:
            result = self.app.resolve(event, cast(Any, context or _Context(aws_request_id=str(uuid.uuid4()))))
        result["headers"] = {**self._headers, **(result.get("headers") or {})}
        return result

    def answer(self, problem: HttpError) -> dict[str, Any]:
        """An error answered before any route is (a token refused by the API's own checks)."""
        headers = {**self._headers, "Content-Type": JSON, **dict(problem.headers)}
        return {"statusCode": problem.status, "headers": headers, "body": _serialize(problem.body()),
                "isBase64Encoded": False}  # fmt: skip

    # ------------------------------------------------------------------ the one error mapping
    def _error(self, error: Exception) -> Response[Any]:
        problem = error if isinstance(error, HttpError) else self._problem(error)
        return Response(problem.status, JSON, problem.body(), dict(problem.headers))

    def _problem(self, error: Exception) -> HttpError:
        if isinstance(error, RequestValidationError):
            return HttpError(400, self._invalid(error))
        if isinstance(error, BadRequest):
            return HttpError(400, error.summary, problems=list(error.problems))
        if isinstance(error, JobNotFound):
            job_id = self.app.context.get("job_id")
            return HttpError(404, f"no job {job_id}" if job_id else error.reason)
        if isinstance(error, OperationRefused):
            return HttpError(409, error.reason)  # what the job's state does not allow, and why
        if isinstance(error, FusionFleetError):
            return HttpError(502, error.reason)
        # A failed call to the stack must not take the API down.
        logger.exception("%s %s failed", self.app.current_event.http_method, self.app.current_event.path)
        detail = f"{type(error).__name__}: {error}" if self._reveal else type(error).__name__
        return HttpError(502, f"the stack did not answer: {detail}")

    def _invalid(self, error: RequestValidationError) -> str:
        """What each refused parameter must be: `limit must be a whole number from 1 to 200, not '0'` (the
        API's declared parameters are whole numbers and cursors, and a cursor is never refused here)."""
        route = self.app.context.get("_route")
        declared = {field.alias: field.field_info for field in route.dependant.query_params} if route else {}
        said = []
        for problem in error.errors():
            name = str(problem.get("loc", ("?",))[-1])
            bounds = {key: getattr(rule, key) for rule in getattr(declared.get(name), "metadata", ())
                      for key in ("ge", "le") if hasattr(rule, key)}  # fmt: skip
            what = "a whole number" + (f" from {bounds['ge']}" if "ge" in bounds else "")
            what += f" to {bounds['le']}" if "le" in bounds else ""
            said.append(f"{name} must be {what}, not {str(problem.get('input', ''))[:40]!r}")
        return "; ".join(said) or "the request's parameters are not valid"

    def _not_found(self, _error: NotFoundError) -> Response[Any]:
        path = self.app.current_event.path
        if self._prefix and path.startswith(self._prefix + "/"):
            path = path[len(self._prefix) :]
        allowed = sorted({method for method, pattern in self._routes if _names(pattern, path)})
        if not allowed:
            return self._error(HttpError(404, f"no such resource: {self.app.current_event.path[:200]}"))
        method = self.app.current_event.http_method.upper()
        allow = ", ".join(allowed)
        return self._error(HttpError(405, f"{method} is not allowed here (allowed: {allow})", (("Allow", allow),)))

    def _sends_json(self) -> bool:
        content_type = self.app.current_event.headers.get("content-type") or ""
        return content_type.split(";", maxsplit=1)[0].strip().lower() == JSON


def http_event(
    method: str, target: str, headers: Mapping[str, str], body: bytes, claims: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A request as API Gateway's HTTP API (payload 2.0) hands it to a Lambda (behind a JWT authorizer
    when `claims` are given)."""
    parts = urlsplit(target)
    now = datetime.now(UTC)
    text: str
    try:
        text, encoded = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode(), True
    context: dict[str, Any] = {
        "http": {"method": method, "path": parts.path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
        "requestId": str(uuid.uuid4()),
        "stage": "$default",
        "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
        "timeEpoch": int(now.timestamp() * 1000),
    }
    if claims is not None:
        # API Gateway passes claims as strings.
        context["authorizer"] = {"jwt": {"claims": {k: str(v) for k, v in claims.items()}, "scopes": None}}
    # API Gateway's decoded parameters, a repeated one's values joined by commas; absent without a query.
    parameters = {name: ",".join(values) for name, values in parse_qs(parts.query, keep_blank_values=True).items()}
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": parts.path,
        "rawQueryString": parts.query,
        **({"queryStringParameters": parameters} if parameters else {}),
        "headers": {key.lower(): value for key, value in headers.items()},
        "requestContext": context,
        "body": text,
        "isBase64Encoded": encoded,
    }


def query_value(query: str, name: str, keep_blank: bool = True) -> str:
    """The last value of `name` in a query string, stripped; "" when absent."""
    return (parse_qs(query, keep_blank_values=keep_blank).get(name) or [""])[-1].strip()


def whole_number(raw: str, name: str, low: int, high: int) -> int:
    """`raw` as a whole number from `low` to `high`, or a 400 that says what it must be."""
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise HttpError(400, f"{name} must be a whole number from {low} to {high}, not {raw[:40]!r}")
    return int(raw)


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


def json_bytes(value: Any) -> bytes:
    """Compact JSON, as every API of ours answers."""
    return json.dumps(value, separators=(",", ":")).encode()


def _names(pattern: re.Pattern[str], path: str) -> bool:
    """Whether `path` names the route's resource: it fits the pattern, and a job id in it is one."""
    found = pattern.match(path)
    if found is None:
        return False
    job_id = found.groupdict().get("job_id")
    return job_id is None or bool(JOB_ID.fullmatch(unquote(job_id)))


def _serialize(value: Any) -> str:
    return json.dumps(plain(value), separators=(",", ":"))


def _without_trailing_slash(event: Mapping[str, Any]) -> dict[str, Any]:
    path = str(event.get("rawPath") or "/")
    trimmed = path.rstrip("/") or "/"
    if trimmed == path:
        return dict(event)
    context = dict(event.get("requestContext") or {})
    context["http"] = {**(context.get("http") or {}), "path": trimmed}
    return {**event, "rawPath": trimmed, "requestContext": context}
