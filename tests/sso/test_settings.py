"""The OIDC settings are read strictly: an issuer over plain HTTP to another machine, or a group
map that is not pairs, stops the process with the setting's name."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from gateway import settings as gateway_settings


def test_the_issuer_is_https_or_a_loopback_address(monkeypatch: pytest.MonkeyPatch) -> None:
    for good in ("https://id.example.com/realms/acme", "http://127.0.0.1:8080", ""):
        monkeypatch.setenv("OIDC_ISSUER", good)
        assert gateway_settings._oidc_issuer() == good
    for bad in ("http://id.example.com", "id.example.com", "ftp://id.example.com"):
        monkeypatch.setenv("OIDC_ISSUER", bad)
        with pytest.raises(ImproperlyConfigured, match="OIDC_ISSUER"):
            gateway_settings._oidc_issuer()


def test_the_group_map_is_pairs() -> None:
    assert gateway_settings._group_map(" approvers=reviewers, approvers=finance,/ops=ops ") == {
        "approvers": ["reviewers", "finance"],
        "/ops": ["ops"],
    }
    assert gateway_settings._group_map("") == {}
    for bad in ("reviewers", "=reviewers", "approvers="):
        with pytest.raises(ImproperlyConfigured, match="OIDC_GROUP_MAP"):
            gateway_settings._group_map(bad)
