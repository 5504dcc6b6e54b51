"""The production settings of docs/security.md pass `manage.py check --deploy` with no warning,
and deploy/gateway.env.example holds the same values."""

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from tests.conftest import ROOT


def production_env() -> dict[str, str]:
    """The variables docs/security.md's "Production over HTTPS" lists, with example values."""
    text = (ROOT / "docs" / "security.md").read_text()
    section = text.split("## Production over HTTPS", 1)[1].split("\n#", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    env = dict(re.findall(r"^([A-Z_]+)=(.+)$", block, re.M))
    assert env, "docs/security.md lists no production settings"
    return env


def example_env() -> dict[str, str]:
    """The variables deploy/gateway.env.example sets (SECRET_KEY empty, to fill in)."""
    text = (ROOT / "deploy" / "gateway.env.example").read_text()
    return dict(re.findall(r"^([A-Z_]+)=(.*)$", text, re.M))


def check_deploy(tmp_path: Path, extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(GATEWAY_DATA_DIR=str(tmp_path / "data"), **extra)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


class DeploySettingsTestCase:
    def test_the_documented_production_settings_pass_the_deploy_check(self, tmp_path: Path) -> None:
        env = production_env()
        assert env["SECRET_KEY"].startswith("$(") or len(env["SECRET_KEY"]) >= 50
        env["SECRET_KEY"] = secrets.token_urlsafe(60)  # the docs have it made, not written
        result = check_deploy(tmp_path, env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "WARNING" not in result.stderr and "no issues" in result.stdout

    def test_the_example_env_file_is_the_documented_recipe(self, tmp_path: Path) -> None:
        """One recipe: the example file sets every documented variable to the documented value,
        and passes the check as it is, once a secret key is filled in."""
        example, documented = example_env(), production_env()
        assert example["SECRET_KEY"] == ""
        for name, value in documented.items():
            if name != "SECRET_KEY":
                assert example.get(name) == value, (name, example.get(name), value)
        result = check_deploy(tmp_path, {**example, "SECRET_KEY": secrets.token_urlsafe(60)})
        assert result.returncode == 0, result.stdout + result.stderr
        assert "WARNING" not in result.stderr and "no issues" in result.stdout

    def test_the_deploy_check_fails_without_them(self, tmp_path: Path) -> None:
        result = check_deploy(tmp_path, {"SECRET_KEY": secrets.token_urlsafe(60)})
        assert result.returncode != 0
        for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
            assert warning in result.stderr, result.stderr

    def test_a_setting_that_is_not_true_or_false_is_refused(self, tmp_path: Path) -> None:
        result = check_deploy(tmp_path, {"SECURE_SSL_REDIRECT": "yes"})
        assert result.returncode != 0
        assert "SECURE_SSL_REDIRECT must be 'true' or 'false'" in result.stderr


class SslRedirectTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, settings: Any) -> None:
        settings.SECURE_SSL_REDIRECT = True
        settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

    def test_pages_redirect_to_https(self, db: Any) -> None:
        r = Client().get("/login/")
        assert r.status_code == 301 and r.headers["Location"].startswith("https://")

    def test_the_health_check_answers_over_plain_http(self, db: Any) -> None:
        # A load balancer's probe reaches the backend over HTTP; a 301 would read as down.
        r = Client().get("/healthz")
        assert r.status_code == 200 and r.json() == {"ok": True}

    def test_the_proxy_header_counts_as_https(self, db: Any) -> None:
        r = Client().get("/login/", headers={"X-Forwarded-Proto": "https"})
        assert r.status_code == 200
