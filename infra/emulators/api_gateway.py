"""Stand-in for API Gateway's HTTP API, for the local stack: JWT authorizer + Lambda proxy integration.

Answers CORS preflights and adds CORS headers as the HTTP API's `CorsConfiguration` does (`cors.py`;
`--cors-origin`, repeatable), verifies each request's bearer token (`jwt_authorizer.py`), turns the
request into the payload 2.0 event API Gateway sends (claims in `requestContext.authorizer.jwt.claims`),
calls the handler in this process and writes back its `statusCode`, `headers` and `body`. Run from the checkout:
python -m infra.emulators.api_gateway --handler functions.api.app.handler --public-key KEY.pem --port P
"""

from __future__ import annotations

import argparse
import base64
import importlib
import json
import logging
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fusionfleet.json_http import http_event
from infra.emulators.cors import CorsPolicy
from infra.emulators.event_source import LambdaContext
from infra.emulators.jwt_authorizer import JwtAuthorizer, Unauthorized

logger = logging.getLogger("api-gateway")

Handler = Callable[[dict[str, Any], Any], Mapping[str, Any]]
MAX_BODY_BYTES = 256 * 1024  # API Gateway's own limit is 10 MB; manifests are at most 64 KiB
HOST = "127.0.0.1"
PUBLIC_ROUTES = frozenset({("GET", "/openapi.json")})  # template.yaml: `Auth: {Authorizer: NONE}`


@dataclass(frozen=True)
class Answer:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


def _json(status: int, value: Any, *headers: tuple[str, str]) -> Answer:
    return Answer(status, (("Content-Type", "application/json"), *headers), json.dumps(value).encode())


@dataclass(frozen=True)
class LocalApi:
    authorizer: JwtAuthorizer
    handler: Handler
    timeout_s: int = 30
    cors: CorsPolicy | None = None

    def respond(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> Answer:
        if self.cors is None:
            return self._respond(method, target, headers, body)
        if self.cors.is_preflight(method, headers):
            return Answer(204, self.cors.preflight(headers), b"")
        answer = self._respond(method, target, headers, body)
        return Answer(answer.status, (*answer.headers, *self.cors.response(headers)), answer.body)

    def _respond(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> Answer:
        try:
            # As the template's routes say: the API's document has no authorizer, every other route the JWT one.
            public = (method, target.split("?", 1)[0]) in PUBLIC_ROUTES
            claims = None if public else self.authorizer.claims(headers)
        except Unauthorized as refused:
            return _json(401, {"message": "Unauthorized", "error": refused.description},
                         ("WWW-Authenticate", refused.challenge))  # fmt: skip
        context = LambdaContext(
            function_name="api",
            aws_request_id=str(uuid.uuid4()),
            deadline_ms=time.time() * 1000 + self.timeout_s * 1000,
        )
        try:
            result = self.handler(http_event(method, target, headers, body, claims), context)
        except Exception:
            logger.exception("the handler raised on %s %s", method, target)
            return _json(500, {"message": "Internal Server Error"})
        raw = str(result.get("body") or "")
        payload = base64.b64decode(raw) if result.get("isBase64Encoded") else raw.encode()
        return Answer(int(result.get("statusCode", 200)), tuple((result.get("headers") or {}).items()), payload)


class ApiServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, api: LocalApi, port: int = 0, host: str = HOST) -> None:
        self.api = api
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}"

    def start_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, args=(0.05,), name="api", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: ApiServer
    server_version = "FusionFleetApi/1"
    protocol_version = "HTTP/1.1"

    def _any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            answer = _json(413, {"message": f"request bodies are at most {MAX_BODY_BYTES} bytes"})
        else:
            body = self.rfile.read(length) if length else b""
            answer = self.server.api.respond(self.command, self.path, dict(self.headers.items()), body)
        self.send_response(answer.status)
        for name, value in answer.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(answer.body)

    def do_GET(self) -> None:
        self._any()

    def do_POST(self) -> None:
        self._any()

    def do_PUT(self) -> None:
        self._any()

    def do_DELETE(self) -> None:
        self._any()

    def do_PATCH(self) -> None:
        self._any()

    def do_OPTIONS(self) -> None:
        self._any()

    def log_message(self, format: str, *args: object) -> None:
        logger.info("%s " + format, self.address_string(), *args)


def _stop(_number: int, _frame: Any) -> None:
    raise SystemExit(0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--handler", required=True, help="module.function, e.g. functions.api.app.handler")
    parser.add_argument("--public-key", required=True, type=Path, help="PEM public key the tokens are signed for")
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--audience", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--name", default="api", help="this process's name in logs and process lists")
    parser.add_argument(
        "--cors-origin", action="append", default=[], help="an origin whose pages may call the API (repeatable)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    module_name, _, function_name = args.handler.rpartition(".")
    handler = getattr(importlib.import_module(module_name), function_name)
    authorizer = JwtAuthorizer.from_file(args.public_key, args.issuer, args.audience)
    cors = CorsPolicy(frozenset(args.cors_origin)) if args.cors_origin else None
    server = ApiServer(LocalApi(authorizer, handler, cors=cors), args.port)
    signal.signal(signal.SIGTERM, _stop)
    logger.info("%s serving %s on %s", args.name, args.handler, server.url)
    print(server.url, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
