"""Where a webhook may be sent: the URL's form, then every address its host resolves to.

A webhook URL is the tenant's, and the farm calls it from inside the stack: a URL naming an internal
address (the instance metadata service, a VPC neighbour, the loopback) would let a tenant make the
farm reach what it should not. So the host is resolved, every address it resolves to is checked,
and the connection is then made to the checked address itself (never resolved again), so a name
that answers differently a moment later (DNS rebinding) cannot slip past the check.

On AWS only global unicast addresses pass and the URL must be https; the local stack may allow the
loopback (its test receivers listen there) and plain http.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from fusionfleet.errors import FusionFleetError

MAX_URL_CHARS = 2048
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# (host, port) → the addresses it resolves to, as text (socket.getaddrinfo at the edge).
Resolver = Callable[[str, int], Sequence[str]]


class WebhookRefused(FusionFleetError):
    """A webhook URL that is malformed, or names (or resolves to) an address the farm must not call."""


@dataclass(frozen=True)
class AddressPolicy:
    allow_loopback: bool = False  # the local stack's receivers listen on 127.0.0.1
    require_https: bool = True


@dataclass(frozen=True)
class WebhookTarget:
    """A checked URL: its parts, ready to be connected to at one of `addresses`."""

    url: str
    scheme: str
    host: str  # as in the URL (without brackets for IPv6): the Host header and TLS server name
    port: int
    path: str  # path and query, what the request line carries
    addresses: tuple[str, ...] = ()  # filled in by `resolve`: every one checked

    @property
    def address(self) -> str:
        """The address the connection goes to (the first checked one)."""
        if not self.addresses:
            raise WebhookRefused(f"{self.url}: not resolved")
        return self.addresses[0]


def check_url(url: str, policy: AddressPolicy) -> WebhookTarget:
    """The URL's form: scheme, host, port, no credentials, no fragment. Pure; raises WebhookRefused."""
    if not isinstance(url, str) or not url:
        raise WebhookRefused("a webhook URL is required")
    if len(url) > MAX_URL_CHARS:
        raise WebhookRefused(f"the webhook URL is {len(url)} characters, over the limit of {MAX_URL_CHARS}")
    if any(ord(ch) < 33 or ord(ch) == 127 for ch in url):
        raise WebhookRefused("the webhook URL contains spaces or control characters")
    parts = urlsplit(url)
    schemes = ("https",) if policy.require_https else ("https", "http")
    if parts.scheme not in schemes:
        raise WebhookRefused(f"the webhook URL must start with {' or '.join(f'{s}://' for s in schemes)}: {url!r}")
    if parts.username is not None or parts.password is not None:
        raise WebhookRefused("the webhook URL must not carry a user name or password (the request is signed)")
    if parts.fragment:
        raise WebhookRefused("the webhook URL must not have a #fragment")
    host = parts.hostname or ""
    if not host:
        raise WebhookRefused(f"the webhook URL names no host: {url!r}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as error:
        raise WebhookRefused(f"the webhook URL's port is not valid: {error}") from error
    literal = _literal(host)
    if literal is not None:
        _check_address(literal, policy, url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return WebhookTarget(url=url, scheme=parts.scheme, host=host, port=port, path=path)


def resolve(target: WebhookTarget, policy: AddressPolicy, resolver: Resolver) -> WebhookTarget:
    """The target with every address its host resolves to, each checked; WebhookRefused if any fails."""
    literal = _literal(target.host)
    if literal is not None:
        found: list[str] = [str(literal)]
    else:
        try:
            found = list(dict.fromkeys(resolver(target.host, target.port)))
        except OSError as error:
            raise WebhookRefused(f"the webhook host {target.host!r} does not resolve: {error}") from error
    if not found:
        raise WebhookRefused(f"the webhook host {target.host!r} resolves to no address")
    checked = []
    for text in found:
        try:
            address = ipaddress.ip_address(text.split("%", 1)[0])  # an IPv6 zone is not part of the address
        except ValueError as error:
            raise WebhookRefused(f"the webhook host {target.host!r} resolved to {text!r}, not an address") from error
        _check_address(address, policy, target.url)
        checked.append(str(address))
    return WebhookTarget(
        url=target.url, scheme=target.scheme, host=target.host, port=target.port, path=target.path,
        addresses=tuple(checked),
    )  # fmt: skip


def address_problem(address: Address, policy: AddressPolicy) -> str | None:
    """Why the farm must not call this address, or None. Pure."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address_problem(address.ipv4_mapped, policy)
    if address.is_loopback:
        return None if policy.allow_loopback else "a loopback address"
    for kind, flag in (
        ("an unspecified address", address.is_unspecified),
        ("a link-local address", address.is_link_local),
        ("a multicast address", address.is_multicast),
        ("a private address", address.is_private),
        ("a reserved address", address.is_reserved),
    ):
        if flag:
            return kind
    if not address.is_global:
        return "an address that is not globally routable"
    return None


def _check_address(address: Address, policy: AddressPolicy, url: str) -> None:
    problem = address_problem(address, policy)
    if problem:
        raise WebhookRefused(f"the webhook URL {url!r} leads to {address}, {problem}: webhooks go only to public hosts")


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None
