"""Sending one webhook request: an HTTP(S) POST to the address that was checked, never re-resolved.

The connection goes to `target.address`; the Host header and the TLS server name (SNI, certificate
check) carry the URL's host name, so a name that resolves elsewhere by the time we connect (DNS
rebinding) changes nothing. Redirects are not followed. The answer's body is read only up to a
few kilobytes, for the delivery record.
"""

from __future__ import annotations

import http.client
import socket
import ssl
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


class _PinnedHttp(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHttps(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._address = address
        self._tls = context

    def connect(self) -> None:
        raw = socket.create_connection((self._address, self.port), self.timeout)
        # The certificate is checked against the URL's host name, not the address connected to.
        self.sock = self._tls.wrap_socket(raw, server_hostname=self.host)


class PinnedSender:
    """Posts with the standard library's HTTP client, connected to the checked address."""

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        self._context = context or ssl.create_default_context()

    def post(self, target: WebhookTarget, body: bytes, headers: dict[str, str], timeout_s: float) -> Answer:
        address = target.address
        began = time.monotonic()
        connection: http.client.HTTPConnection
        if target.scheme == "https":
            connection = _PinnedHttps(target.host, target.port, address, timeout_s, self._context)
        else:
            connection = _PinnedHttp(target.host, target.port, address, timeout_s)
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
            text = response.read(ANSWER_BYTES).decode("utf-8", "replace")
            status = response.status
        except (OSError, http.client.HTTPException) as error:
            return Answer(None, f"{type(error).__name__}: {error}", round(time.monotonic() - began, 3), address)
        finally:
            connection.close()
        ok = 200 <= status < 300
        return Answer(status, "" if ok else text.strip(), round(time.monotonic() - began, 3), address)
