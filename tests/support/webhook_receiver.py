"""A webhook receiver for tests and benchmarks: an HTTP server on the loopback that records every request
(when, headers, body, what it answered) and answers 500 to the first `fail_first` of them."""

from __future__ import annotations

import http.server
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Received:
    at: float  # the receiver's clock (epoch seconds)
    headers: dict[str, str]
    body: bytes
    answered: int

    @property
    def webhook_id(self) -> str:
        return self.headers.get("webhook-id", "")

    @property
    def timestamp(self) -> int:
        return int(self.headers.get("webhook-timestamp", "0"))

    def payload(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.body)
        return value


@dataclass
class WebhookReceiver:
    fail_first: int = 0
    received: list[Received] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: http.server.ThreadingHTTPServer | None = None

    def start(self) -> str:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._lock:
                    status = 500 if len(receiver.received) < receiver.fail_first else 200
                    headers = {name.lower(): value for name, value in self.headers.items()}
                    receiver.received.append(Received(time.time(), headers, body, status))
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok" if status == 200 else b"receiver down for the test")

            def log_message(self, *args: Any) -> None:
                return None

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self.received)

    def delivered(self) -> list[Received]:
        """The requests it accepted (one per event), in the order they arrived."""
        return [item for item in self.snapshot() if item.answered == 200]
