"""The gateway says its version (pyproject.toml's, through the installed package's metadata):
in /readyz, at the foot of every page and in the OpenAPI document."""

import html
import importlib.metadata
from pathlib import Path
from typing import Any

import pytest

from infra import version as versions
from tests.conftest import ROOT


@pytest.fixture
def current() -> str:
    found = versions.version()
    assert found and found != "unknown"
    return found


@pytest.mark.django_db
class VersionTestCase:
    def test_readyz_says_it(self, client: Any, current: str) -> None:
        answer = client.get("/readyz", HTTP_HOST="127.0.0.1")
        assert answer.json()["version"] == current

    def test_every_page_says_it_at_its_foot(self, client: Any, users: Any, current: str) -> None:
        # The login page, before anyone logs in, and the inbox after.
        for page in ("/login/", "/"):
            if page == "/":
                client.force_login(users["reviewer"])
            text = html.unescape(client.get(page).content.decode())
            assert f'<footer class="foot">Approval gateway {current}</footer>' in text, page

    def test_the_openapi_document_says_it(self, api: Any, current: str) -> None:
        document = api("reviewer").get("/api/openapi.json").json()
        assert document["info"]["version"] == current


def test_it_is_the_installed_package_s_version() -> None:
    versions.version.cache_clear()
    assert versions.version() == importlib.metadata.version("approval-gateway")


def test_without_the_package_installed_it_reads_pyproject(tmp_path: Path, monkeypatch) -> None:
    """The Docker image runs the source without installing it (Dockerfile)."""

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    versions.version.cache_clear()
    try:
        assert versions.version() == versions.pyproject_version(ROOT / "pyproject.toml")
        assert versions.version() != "unknown"
    finally:
        versions.version.cache_clear()
    assert versions.pyproject_version(tmp_path / "absent.toml") == "unknown"
