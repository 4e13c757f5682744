"""Sending one webhook request: an HTTP(S) POST to the address that was checked, never re-resolved.

The connection goes to `target.address`; the Host header and the TLS server name (SNI, certificate
check) carry the URL's host name, so a name that resolves elsewhere by the time we connect (DNS
rebinding) changes nothing. Redirects are not followed. The answer's body is read only up to a
few kilobytes, for the delivery record.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Protocol

from fusionfleet.webhooks.addresses import WebhookTarget

ANSWER_BYTES = 2048  # of the receiver's answer, kept in the delivery record
USER_AGENT = "FusionFleet-Webhooks/1"


@dataclass(frozen=True)
class Answer:
    status: int | None  # None: no answer (timeout, refused, reset, TLS failure)
    error: str  # why there was no answer, or the start of a non-2xx answer's body
    duration_s: float
    address: str


class WebhookSender(Protocol):
    def post(self, target: WebhookTarget, body: bytes, headers: dict[str, str], timeout_s: float) -> Answer: ...


def resolve_host(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (TCP), as text: the resolver the address policy checks."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class _Cut:
    """Shuts a connection's socket at its deadline, which ends whatever read or write waits on it."""

    def __init__(self, connection: _PinnedHttp | _PinnedHttps, after_s: float) -> None:
        self._connection = connection
        self.fired = threading.Event()
        self._timer = threading.Timer(after_s, self._shut)
        self._timer.daemon = True
        self._timer.start()

    def _shut(self) -> None:
        self.fired.set()
        raw = self._connection.raw
        if raw is None:
            return  # still connecting: the connect's own timeout ends it
        with contextlib.suppress(OSError):  # already closed
            raw.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


class _PinnedHttp(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address
        self.raw: socket.socket | None = None

    def connect(self) -> None:
        self.sock = self.raw = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHttps(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._address = address
        self._tls = context
        self.raw: socket.socket | None = None

    def connect(self) -> None:
        raw = self.raw = socket.create_connection((self._address, self.port), self.timeout)
        # The certificate is checked against the URL's host name, not the address connected to.
        self.sock = self._tls.wrap_socket(raw, server_hostname=self.host)


class PinnedSender:
    """Posts with the standard library's HTTP client, connected to the checked address."""

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        self._context = context or ssl.create_default_context()

    def post(self, target: WebhookTarget, body: bytes, headers: dict[str, str], timeout_s: float) -> Answer:
        address = target.address
        began = time.monotonic()
        connection: _PinnedHttp | _PinnedHttps
        if target.scheme == "https":
            connection = _PinnedHttps(target.host, target.port, address, timeout_s, self._context)
        else:
            connection = _PinnedHttp(target.host, target.port, address, timeout_s)
        # The socket's timeout bounds each operation only: a receiver trickling its answer a byte at a
        # time kept one POST going for minutes. At timeout_s the socket is shut, which ends any wait.
        cut = _Cut(connection, timeout_s)
        try:
            connection.request(
                "POST",
                target.path,
                body=body,
                headers={
                    **headers,
                    "Content-Type": "application/json",
                    "User-Agent": USER_AGENT,
                    "Content-Length": str(len(body)),
                },
            )
            response = connection.getresponse()
            if cut.fired.is_set():
                # Cut inside the headers: http.client reads the shut socket's end as their end.
                raise TimeoutError("cut")
            status = response.status
            # The status is the answer; its body, cut at the deadline, is only kept for the record.
            text = ""
            with contextlib.suppress(OSError, http.client.HTTPException):
                text = response.read(ANSWER_BYTES).decode("utf-8", "replace")
        except (OSError, http.client.HTTPException, ValueError) as error:
            took = round(time.monotonic() - began, 3)
            if cut.fired.is_set():
                return Answer(None, f"no whole answer within {timeout_s:g} s", took, address)
            return Answer(None, f"{type(error).__name__}: {error}", took, address)
        finally:
            cut.cancel()
            connection.close()
        ok = 200 <= status < 300
        return Answer(status, "" if ok else text.strip(), round(time.monotonic() - began, 3), address)
