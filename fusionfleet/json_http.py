"""JSON over HTTP, the part every API of ours shares: routing by method and path pattern, errors as
`{"error": ...}` with a status, compact JSON bodies.

Pure: no server, no sockets. The local dashboard's API (fleetctl.dashboard.api) and the tenants' API
(functions.api.routes) each declare a route table, serve what it matched and turn their own
exceptions into an `HttpError`; their transports (a stdlib server, API Gateway) stay theirs.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

Headers = tuple[tuple[str, str], ...]


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
class Found:
    """A path that names a resource: the route's name for each method it takes, and the path's parameters."""

    names: Mapping[str, str]  # method → route name
    params: Mapping[str, str] = field(default_factory=dict)  # as they appear in the path (not unquoted)

    @property
    def methods(self) -> frozenset[str]:
        return frozenset(self.names)


@dataclass(frozen=True)
class Route:
    method: str
    pattern: tuple[str, ...]  # path segments: literals, or `{name}` for a parameter (any one segment)
    name: str

    def params(self, segments: list[str]) -> dict[str, str] | None:
        """The parameters when `segments` fit the pattern, else None."""
        if len(segments) != len(self.pattern):
            return None
        params: dict[str, str] = {}
        for part, segment in zip(self.pattern, segments, strict=True):
            if part.startswith("{") and part.endswith("}"):
                params[part[1:-1]] = segment
            elif part != segment:
                return None
        return params


class Router:
    """Routes by method and path pattern under a prefix, e.g. `Router("/api", [("GET", "jobs/{job_id}", "job")])`.

    `trailing_slash`: whether `/jobs/` names what `/jobs` does (the tenants' API) or nothing (the dashboard's).
    """

    def __init__(self, prefix: str, routes: Iterable[tuple[str, str, str]], trailing_slash: bool = False) -> None:
        self._head = ["", *(part for part in prefix.split("/") if part)]
        self._routes = tuple(Route(method, tuple(pattern.split("/")), name) for method, pattern, name in routes)
        self._trailing_slash = trailing_slash

    def match(self, path: str) -> Found | None:
        """What the path names (whatever the method), or None when it names nothing."""
        if self._trailing_slash:
            path = path.rstrip("/")
        parts = path.split("/")
        if parts[: len(self._head)] != self._head:
            return None
        segments = parts[len(self._head) :]
        names: dict[str, str] = {}
        found: dict[str, str] = {}
        for route in self._routes:
            params = route.params(segments)
            if params is not None:
                names[route.method] = route.name
                found = params
        return Found(names, found) if names else None


def not_found(path: str) -> HttpError:
    return HttpError(404, f"no such resource: {path[:200]}")


def method_not_allowed(method: str, allowed: frozenset[str], name_allowed: bool = True) -> HttpError:
    """405 with `Allow`; `name_allowed`: the message names the allowed methods too (the dashboard's does)."""
    allow = ", ".join(sorted(allowed))
    listed = f" (allowed: {allow})" if name_allowed else ""
    return HttpError(405, f"{method} is not allowed here{listed}", (("Allow", allow),))


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
