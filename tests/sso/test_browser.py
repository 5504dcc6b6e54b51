"""In Chromium, on a phone: the login page offers the provider, its sign-in page signs the
person in, they land in the inbox as a reviewer, and Log out takes them through the provider's
end-session endpoint back to the login page. daphne serves the gateway (tests.e2e's live
server, with the OIDC settings); the stand-in provider runs in this process."""

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from tests.conftest import ARTIFACTS, ROOT

# The browser tests' Chromium, and their ORM beside Playwright's loop: fixtures, by name.
from tests.e2e.conftest import PHONE, LiveServer, browser, orm_beside_playwright  # noqa: F401
from tests.e2e.test_accessibility import violations
from tests.sso.provider import CLIENT_ID, CLIENT_SECRET, Provider

pytestmark = pytest.mark.e2e

PROVIDER_NAME = "Stand-in ID"


class OidcServer(LiveServer):
    """daphne with the gateway set up to sign people in through `issuer`."""

    def __init__(self, log_dir: Any, issuer: str) -> None:
        super().__init__(log_dir)
        self.issuer = issuer

    def env(self) -> dict[str, str]:
        env = super().env()
        env.update(
            OIDC_ISSUER=self.issuer,
            OIDC_CLIENT_ID=CLIENT_ID,
            OIDC_CLIENT_SECRET=CLIENT_SECRET,
            OIDC_PROVIDER_NAME=PROVIDER_NAME,
            SITE_URL=self.url,
        )
        return env


@pytest.fixture(scope="module")
def stand_in() -> Iterator[Provider]:
    provider = Provider().start()
    yield provider
    provider.stop()


@pytest.fixture(scope="module")
def oidc_server(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any, stand_in: Provider
) -> Iterator[OidcServer]:
    with django_db_blocker.unblock():
        server = OidcServer(tmp_path_factory.mktemp("daphne-sso"), stand_in.url)
        server.start()
    yield server
    server.stop()


def shoot(page: Any, name: str) -> None:
    """test-artifacts/NAME.png; with UPDATE_SCREENSHOTS=1, docs/screenshots/NAME.png too."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        shutil.copy(ARTIFACTS / f"{name}.png", ROOT / "docs" / "screenshots" / f"{name}.png")


def test_a_reviewer_signs_in_through_the_providers_page_and_lands_in_the_inbox(
    transactional_db: Any,
    oidc_server: OidcServer,
    stand_in: Provider,
    browser: Any,  # noqa: F811 - the fixture imported above
) -> None:
    stand_in.add(
        "dana",
        email="dana@example.com",
        email_verified=True,
        preferred_username="dana",
        groups=["reviewers"],
    )
    context = browser.new_context(viewport=PHONE)
    errors: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{oidc_server.url}/login/")
        button = page.get_by_role("link", name=f"Sign in with {PROVIDER_NAME}")
        expect(button).to_be_visible()
        shoot(page, "login-phone")
        assert violations(page, oidc_server.url) == []

        button.click()
        page.wait_for_url(f"{stand_in.url}/authorize?*")
        page.fill("input[name=login]", "dana")
        page.click("button[type=submit]")

        page.wait_for_url(f"{oidc_server.url}/")
        expect(page.locator("h1")).to_contain_text("Inbox")
        dana = User.objects.get(username="dana")
        assert dana.groups.filter(name="reviewers").exists()

        # Log out, from the phone's menu: through the provider's end-session endpoint, back
        # to the login page (CSP's form-action lets the form's redirect go to the provider).
        page.locator(".nav-more summary").click()
        page.locator(".nav-menu .logout button").click()
        page.wait_for_url(f"{oidc_server.url}/login/")
        assert [q.get("client_id") for q in stand_in.logouts] == [CLIENT_ID]
        page.goto(f"{oidc_server.url}/")
        page.wait_for_url(f"{oidc_server.url}/login/?next=/")
    finally:
        context.close()
    assert not errors
