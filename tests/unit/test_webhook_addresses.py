"""The outbound-address policy: the URL's form, and every address its host resolves to."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from fusionfleet.webhooks.addresses import AddressPolicy, WebhookRefused, check_url, resolve

AWS = AddressPolicy()
LOCAL = AddressPolicy(allow_loopback=True, require_https=False)


def resolver(answers: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    def lookup(host: str, port: int) -> Sequence[str]:
        if host not in answers:
            raise OSError(f"no such host {host}")
        return answers[host]

    return lookup


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.com/hook", "must start with https://"),
        ("http://example.com/hook", "must start with https://"),
        ("https://user:pw@example.com/", "user name or password"),
        ("https:///hook", "names no host"),
        ("https://example.com/a#frag", "fragment"),
        ("https://example.com/a b", "spaces or control"),
        ("https://example.com:99999/", "port"),
        ("https://127.0.0.1/", "loopback"),
        ("https://10.1.2.3/", "private"),
        ("https://169.254.169.254/latest/meta-data", "link-local"),
        ("https://[::1]/", "loopback"),
        ("https://[::ffff:10.0.0.1]/", "private"),
        ("https://[fe80::1]/", "link-local"),
        ("https://100.64.0.1/", "not globally routable"),
        ("https://0.0.0.0/", "unspecified"),
        ("https://224.0.0.1/", "multicast"),
        ("", "required"),
        ("https://example.com/" + "a" * 2100, "over the limit"),
    ],
)
def test_a_bad_url_is_refused_naming_what_is_wrong(url: str, why: str) -> None:
    with pytest.raises(WebhookRefused, match=why):
        check_url(url, AWS)


def test_a_public_https_url_passes_and_keeps_its_path_and_query() -> None:
    target = check_url("https://hooks.example.com:8443/in/fusion?k=v", AWS)
    assert (target.scheme, target.host, target.port, target.path) == (
        "https",
        "hooks.example.com",
        8443,
        "/in/fusion?k=v",
    )


def test_every_resolved_address_is_checked_and_one_private_answer_refuses_the_host() -> None:
    # GIVEN a name that resolves to a public and a private address (a split answer or a rebinding attempt)
    lookup = resolver({"hooks.example.com": ["93.184.216.34", "10.0.0.7"]})
    target = check_url("https://hooks.example.com/in", AWS)
    # THEN it is refused, naming the private one
    with pytest.raises(WebhookRefused, match=r"10\.0\.0\.7, a private address"):
        resolve(target, AWS, lookup)


def test_the_connection_is_pinned_to_the_first_checked_address() -> None:
    lookup = resolver({"hooks.example.com": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"]})
    target = resolve(check_url("https://hooks.example.com/in", AWS), AWS, lookup)
    assert target.addresses == ("93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946")
    assert target.address == "93.184.216.34"
    assert target.host == "hooks.example.com"  # the Host header and the TLS name stay the URL's


def test_a_name_resolving_to_the_metadata_service_is_refused() -> None:
    lookup = resolver({"evil.example.com": ["169.254.169.254"]})
    with pytest.raises(WebhookRefused, match="link-local"):
        resolve(check_url("https://evil.example.com/", AWS), AWS, lookup)


def test_an_unresolvable_host_is_refused_with_the_resolver_error() -> None:
    with pytest.raises(WebhookRefused, match="does not resolve"):
        resolve(check_url("https://nowhere.invalid/", AWS), AWS, resolver({}))


def test_the_local_stack_may_call_its_own_loopback_over_http_but_nothing_private() -> None:
    lookup = resolver({"localhost": ["127.0.0.1", "::1"], "lan.example": ["192.168.1.5"]})
    assert resolve(check_url("http://localhost:8080/hook", LOCAL), LOCAL, lookup).address == "127.0.0.1"
    with pytest.raises(WebhookRefused, match="private"):
        resolve(check_url("http://lan.example/hook", LOCAL), LOCAL, lookup)
    with pytest.raises(WebhookRefused, match="loopback"):
        resolve(check_url("https://localhost/hook", AWS), AWS, lookup)
