"""The dashboard's HTTP server: stdlib `ThreadingHTTPServer` on loopback, the page's files and the JSON API.

The handler only adapts HTTP to `api.handle` and serves the static files of `static/`; it holds no state
of its own, so any number of browsers may poll it.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from fleetctl.dashboard import api, site
from fleetctl.dashboard.source import DashboardSource

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
# The page's files by the path they are served under, with their content type.
STATIC: dict[str, tuple[str, str]] = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/render.js": ("render.js", "text/javascript; charset=utf-8"),
    "/static/tenant.js": ("tenant.js", "text/javascript; charset=utf-8"),
    "/static/preview.js": ("preview.js", "text/javascript; charset=utf-8"),
    "/static/style.css": ("style.css", "text/css; charset=utf-8"),
    # The tenant's page, as CloudFront serves it on AWS; it calls the local HTTP API (another origin,
    # so CORS is exercised) named by `#api=` in the link `fusionfleet local status` prints.
    "/tenant/": ("tenant.html", "text/html; charset=utf-8"),
    "/tenant/index.html": ("tenant.html", "text/html; charset=utf-8"),
}
TENANT_PREFIX = "/tenant/"
# The local API listens on 127.0.0.1 at a port chosen at `local up`.
LOCAL_API_ORIGINS = "http://127.0.0.1:* http://localhost:*"
# Names under which a browser on this machine reaches the server. Any other Host header is refused,
# so a web page cannot reach the API through a DNS name rebound to 127.0.0.1.
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
OPERATOR_POLICY = "default-src 'self'; img-src 'self' data:; object-src 'none'; frame-ancestors 'none'"
SECURITY_HEADERS = (
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
)
MAX_BODY_BYTES = 4096


def content_policy(path: str) -> str:
    return site.content_policy(LOCAL_API_ORIGINS) if path.startswith(TENANT_PREFIX) else OPERATOR_POLICY


class DashboardServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, source: DashboardSource, port: int = 0, host: str = HOST) -> None:
        self.source = source
        super().__init__((host, port), _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"

    def start_in_thread(self) -> threading.Thread:
        """Serve from a daemon thread (tests, embedding); `shutdown()` stops it."""
        thread = threading.Thread(target=self.serve_forever, args=(0.05,), name="dashboard", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: DashboardServer
    server_version = "FusionFleetDashboard/1"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def _dispatch(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            self._send(api.error(413, f"request bodies are at most {MAX_BODY_BYTES} bytes"), method)
            return
        body = self.rfile.read(length) if length else b""  # read, to keep the connection usable
        host = (self.headers.get("Host") or "").strip().lower()
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if name not in LOCAL_HOSTS:
            self._send(api.error(403, "the dashboard answers only on 127.0.0.1 and localhost"), method)
            return
        parts = urlsplit(self.path)
        self._policy = content_policy(parts.path)
        if parts.path.startswith("/api/"):
            answer = api.handle(
                self.server.source,
                "GET" if method == "HEAD" else method,
                self.path,
                dict(self.headers.items()),
                body,
                datetime.now(UTC),
            )
        else:
            answer = self._static(parts.path, method)
        self._send(answer, method)

    def _static(self, path: str, method: str) -> api.Response:
        if path == TENANT_PREFIX + site.CONFIG_KEY:
            # No API named: the page takes it from its link (#api=…), as only a local page may.
            return api.Response(200, site.site_config(""), site.JSON)
        found = STATIC.get(path)
        if found is None:
            return api.error(404, f"no such page: {path[:200]}")
        if method not in ("GET", "HEAD"):
            return api.error(405, f"{method} is not allowed here (allowed: GET)", (("Allow", "GET"),))
        name, content_type = found
        return api.Response(200, site.static_file(name), content_type)

    def _send(self, answer: api.Response, method: str) -> None:
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        policy = getattr(self, "_policy", OPERATOR_POLICY)
        for header, value in (("Content-Security-Policy", policy), *SECURITY_HEADERS, *answer.headers):
            self.send_header(header, value)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(answer.body)

    def log_message(self, format: str, *args: object) -> None:
        # The page polls every 2 s: requests are debug noise, errors are logged where they happen.
        logger.debug("%s " + format, self.address_string(), *args)
