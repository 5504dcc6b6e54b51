"""SSRF: webhook URLs that resolve to non-public addresses are refused, unless allowed."""

from typing import Any

import pytest

from infra import addresses


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://127.0.0.1/hook", "loopback"),
        ("http://localhost:8000/hook", "loopback"),
        ("http://[::1]/hook", "loopback"),
        ("http://[::ffff:127.0.0.1]/hook", "loopback"),
        ("http://10.0.0.5/hook", "private"),
        ("http://172.16.3.4/hook", "private"),
        ("https://192.168.1.1/hook", "private"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://[fe80::1]/hook", "link-local"),
        ("http://224.0.0.1/hook", "multicast"),
        ("http://0.0.0.0/hook", "unspecified"),
        ("http://100.64.0.1/hook", "non-public"),
    ],
)
def test_it_refuses_addresses_that_are_not_public(url: str, kind: str, settings: Any) -> None:
    settings.WEBHOOKS_ALLOW_PRIVATE = False
    with pytest.raises(addresses.Refused, match=f"a {kind} address"):
        addresses.check(url)


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/", "http:///nohost", "http://user:pw@8.8.8.8/", "http://8.8.8.8:99999/"],
)
def test_it_refuses_urls_it_cannot_send_to(url: str, settings: Any) -> None:
    settings.WEBHOOKS_ALLOW_PRIVATE = True
    with pytest.raises(addresses.Refused):
        addresses.check(url)


def test_a_public_address_is_pinned_with_its_name_kept(settings: Any) -> None:
    settings.WEBHOOKS_ALLOW_PRIVATE = False
    target = addresses.target("https://8.8.8.8:8443/in?x=1")
    assert target.url == "https://8.8.8.8:8443/in?x=1"
    assert target.host_header == "8.8.8.8:8443" and target.sni_hostname is None


def test_the_setting_lets_private_addresses_through(settings: Any) -> None:
    settings.WEBHOOKS_ALLOW_PRIVATE = True
    target = addresses.target("http://localhost:8123/hook")
    assert target.url in ("http://127.0.0.1:8123/hook", "http://[::1]:8123/hook")
    assert target.host_header == "localhost:8123"
