"""CORS as API Gateway's HTTP API applies it (`CorsConfiguration`), for the local gateway. Pure.

API Gateway answers a preflight (OPTIONS with Access-Control-Request-Method) itself, before any
authorizer, and adds Access-Control-Allow-Origin to every response for an allowed origin. An origin
that is not allowed gets no CORS headers at all, so the browser refuses the page the response. The
template's `HttpApi.CorsConfiguration` states the same values (tests/static/test_dashboard_site.py
compares them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

ALLOW_METHODS = ("GET", "POST")
ALLOW_HEADERS = ("authorization", "content-type")
MAX_AGE_S = 600

Headers = tuple[tuple[str, str], ...]


def _header(headers: Mapping[str, str], name: str) -> str | None:
    wanted = name.lower()
    return next((value for key, value in headers.items() if key.lower() == wanted), None)


@dataclass(frozen=True)
class CorsPolicy:
    origins: frozenset[str]
    methods: tuple[str, ...] = ALLOW_METHODS
    headers: tuple[str, ...] = ALLOW_HEADERS
    max_age_s: int = MAX_AGE_S

    def is_preflight(self, method: str, headers: Mapping[str, str]) -> bool:
        return method == "OPTIONS" and _header(headers, "Access-Control-Request-Method") is not None

    def preflight(self, headers: Mapping[str, str]) -> Headers:
        """The headers of the 204 answering a preflight: none unless origin, method and headers are allowed."""
        origin = _header(headers, "Origin")
        method = (_header(headers, "Access-Control-Request-Method") or "").upper()
        asked = {h.strip().lower() for h in (_header(headers, "Access-Control-Request-Headers") or "").split(",")}
        if origin not in self.origins or method not in self.methods or not asked - {""} <= set(self.headers):
            return (("Vary", "Origin"),)
        return (
            ("Access-Control-Allow-Origin", origin),
            ("Access-Control-Allow-Methods", ",".join(self.methods)),
            ("Access-Control-Allow-Headers", ",".join(self.headers)),
            ("Access-Control-Max-Age", str(self.max_age_s)),
            ("Vary", "Origin"),
        )

    def response(self, headers: Mapping[str, str]) -> Headers:
        """What every other response carries: the origin echoed when it is allowed, nothing otherwise."""
        origin = _header(headers, "Origin")
        if origin is None:
            return ()
        if origin not in self.origins:
            return (("Vary", "Origin"),)
        return (("Access-Control-Allow-Origin", origin), ("Vary", "Origin"))
