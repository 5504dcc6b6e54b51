"""Passkey step-up in Chromium, with the DevTools protocol's virtual authenticator (its WebAuthn
domain): a reviewer registers a passkey on the account page and approves a `step_up` request
with it, and the trail names the passkey; a reviewer without one is refused and the request
still waits.

WebAuthn takes no IP address as a relying party, so this module's daphne serves the site as
http://localhost:<port> (its SITE_URL), where the passkeys belong to "localhost"."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from access.models import Passkey
from agents.models import Event, Suspension
from tests.conftest import wait_for
from tests.e2e.conftest import DESKTOP, PASSWORD, PHONE, LiveServer, Site
from tests.e2e.test_accessibility import violations

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

AGENTS = """
agents:
  - name: treasury
    description: Pays once a reviewer approves with a passkey.
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {execution_mode: blocking, timeout: 600}
    policy:
      four_eyes: true
      tools:
        transfer_funds: {step_up: true}
    script:
      - text: Paying supplier invoice 118.
        tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 900}}
      - text: Paid.
        if_error:
          text: Not paid.
"""


class LocalhostServer(LiveServer):
    """daphne as http://localhost:<port>, its SITE_URL, so the passkeys' RP id is localhost."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir)
        self.url = f"http://localhost:{self.port}"

    def env(self) -> dict[str, str]:
        env = super().env()
        env["SITE_URL"] = env["WEBSOCKET_ALLOWED_ORIGINS"] = self.url
        return env


@pytest.fixture(scope="module")
def localhost_server(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any
) -> Iterator[LocalhostServer]:
    with django_db_blocker.unblock():
        server = LocalhostServer(tmp_path_factory.mktemp("daphne-localhost"))
        server.start()
    yield server
    server.stop()


@pytest.fixture
def site(
    localhost_server: LocalhostServer, browser: Any, worker: Any, users: dict[str, Any]
) -> Iterator[Site]:
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    hasher = PBKDF2PasswordHasher()
    for user in users.values():
        user.password = hasher.encode(PASSWORD, hasher.salt(), iterations=1000)
        user.save(update_fields=["password"])
    if localhost_server.proc is None or localhost_server.proc.poll() is not None:
        localhost_server.start()
    found = Site(localhost_server, browser, users)
    yield found
    found.close()
    assert not found.dialogs, f"a dialog fired: {found.dialogs}"
    assert not found.errors, f"the page threw: {found.errors}"


def authenticator(page: Any) -> tuple[Any, str]:
    """A platform authenticator with user verification, in this page's browser context."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    made = cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
            }
        },
    )
    return cdp, made["authenticatorId"]


class StepUpPageTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.site = site

    def start(self) -> Suspension:
        r = self.site.api("operator").post("/api/threads", {"agent": "treasury", "message": "pay"})
        assert r.status_code == 201, r.content
        return wait_for(
            lambda: Suspension.objects.filter(thread_id=r.json()["id"]).first(),
            timeout=30,
            what="the request",
        )

    def register(self, page: Any, name: str) -> None:
        page.goto(self.site.url("/account/"))
        expect(page.locator(".passkeys-none")).to_be_visible()
        page.fill("input[name=passkey-name]", name)
        page.click(".passkey-add button[type=submit]")
        expect(page.locator("p.notice")).to_have_text("Passkey added.")
        expect(page.locator(".passkeys .passkey-name")).to_have_text([name])

    def test_a_passkey_registered_on_the_account_page_approves_a_step_up_request(self) -> None:
        s = self.start()
        # bob has no passkey: Approve asks for one and decides nothing.
        bob = self.site.login("teammate", viewport=PHONE)
        authenticator(bob)
        card = bob.locator(f"#s-{s.id}")
        expect(card.locator(".step-up-line")).to_contain_text("Passkey needed")
        self.site.shoot(bob, "stepup-card-phone")
        card.locator("[data-action=approve]").click()
        expect(card.locator(".notice")).to_contain_text("You have no passkey")
        self.site.shoot(bob, "stepup-refused-phone")
        assert Suspension.objects.get(pk=s.pk).status == "pending"

        # alice registers one on her account page, then approves with it.
        alice = self.site.login("reviewer", viewport=DESKTOP)
        cdp, auth_id = authenticator(alice)
        self.register(alice, "Work laptop")
        self.site.shoot(alice, "stepup-account-desktop")
        assert violations(alice, self.site.server.url) == []
        [credential] = cdp.send("WebAuthn.getCredentials", {"authenticatorId": auth_id})[
            "credentials"
        ]
        [row] = Passkey.objects.filter(user__username="alice")
        assert row.credential_id == credential["credentialId"].rstrip("=").replace(
            "+", "-"
        ).replace("/", "_")
        alice.goto(self.site.url(f"/threads/{s.thread_id}/"))
        card = alice.locator(f"#s-{s.id}")
        expect(card.locator(".step-up-line")).to_be_visible()
        self.site.shoot(alice, "stepup-card-desktop")
        assert violations(alice, self.site.server.url) == []
        card.locator("[data-action=approve]").click()
        expect(card).to_have_attribute("data-status", "approved")
        decided = Event.objects.get(suspension_id=s.pk, type="SUSPENSION_DECIDED")
        assert decided.actor_name == "alice"
        assert decided.payload["passkey"] == {
            "credential": row.credential_id,
            "name": "Work laptop",
        }
        row.refresh_from_db()
        assert row.last_used_at is not None
        # Her phone's account page lists the passkey without running off the screen.
        phone = self.site.login("reviewer", viewport=PHONE)
        phone.goto(self.site.url("/account/"))
        expect(phone.locator(".passkeys .passkey-name")).to_have_text(["Work laptop"])
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], width
        self.site.shoot(phone, "stepup-account-phone")
        assert violations(phone, self.site.server.url) == []

    def test_a_passkey_removed_no_longer_approves(self) -> None:
        alice = self.site.login("reviewer", viewport=DESKTOP)
        authenticator(alice)
        self.register(alice, "Old key")
        alice.click(".passkeys button[type=submit]")
        expect(alice.locator("p.notice")).to_have_text("Passkey removed.")
        assert list(
            Event.objects.filter(type__startswith="PASSKEY_").values_list("type", flat=True)
        ) == [
            "PASSKEY_REGISTERED",
            "PASSKEY_REMOVED",
        ]
        s = self.start()
        alice.goto(self.site.url(f"/threads/{s.thread_id}/"))
        card = alice.locator(f"#s-{s.id}")
        card.locator("[data-action=approve]").click()
        expect(card.locator(".notice")).to_contain_text("You have no passkey")
        assert Suspension.objects.get(pk=s.pk).status == "pending"
