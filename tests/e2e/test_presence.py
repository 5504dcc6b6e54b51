"""Claim and presence in two browsers, each served by its own daphne process.

Two reviewers on two servers sharing the database (and, with REDIS_URL, the channel layer), as
behind a proxy: what one does must reach the other's page live, across processes. Each sees
the other looking at the card, a claim ("Dana is reviewing"), its release, its lapse and its
end when the claimer leaves, and may still decide.
"""

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Event, Suspension
from presence.models import Claim
from tests.conftest import ARTIFACTS
from tests.e2e.conftest import PASSWORD, PHONE, LiveServer
from tests.e2e.test_inbox import AGENTS, card, pending_of, start

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

DESKTOP = {"width": 1366, "height": 900}
CLAIM_SECONDS = 10


class ShortClaims(LiveServer):
    def env(self) -> dict[str, str]:
        return {**super().env(), "CLAIM_SECONDS": str(CLAIM_SECONDS)}


@pytest.fixture(scope="module")
def servers(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any
) -> Iterator[list[LiveServer]]:
    with django_db_blocker.unblock():
        started = [ShortClaims(tmp_path_factory.mktemp(f"daphne{i}")) for i in (1, 2)]
        for server in started:
            server.start()
    yield started
    for server in started:
        server.stop()


class PresenceTestCase:
    @pytest.fixture(autouse=True)
    def setup(
        self,
        servers: list[LiveServer],
        browser: Any,
        worker: Any,
        users: dict[str, Any],
        load_agents: Any,
    ) -> Iterator[None]:
        from django.contrib.auth.hashers import PBKDF2PasswordHasher

        from tests.e2e.conftest import HttpApi

        hasher = PBKDF2PasswordHasher()
        for user in users.values():
            user.password = hasher.encode(PASSWORD, hasher.salt(), iterations=1000)
            user.save(update_fields=["password"])
        alice, bob = users["reviewer"], users["teammate"]
        alice.first_name = "Dana"
        alice.save(update_fields=["first_name"])
        # A name is other people's text: it must show as typed, never as markup.
        bob.first_name, bob.last_name = "Sam", "O'Neil <b>!</b>"
        bob.save(update_fields=["first_name", "last_name"])
        self.bob_name = "Sam O'Neil <b>!</b>"
        load_agents(AGENTS)
        for server in servers:
            if server.proc is None or server.proc.poll() is not None:
                server.start()
        self.servers = servers
        self.browser = browser
        self.users = users
        self.contexts: list[Any] = []
        self.errors: list[str] = []
        # The admin starts the runs, so both reviewers may decide them (four eyes).
        self.api = HttpApi(servers[0].url, users["admin"])
        yield
        for context in self.contexts:
            context.close()
        assert not self.errors, self.errors

    def login(self, who: str, server: LiveServer, viewport: dict[str, int]) -> Any:
        context = self.browser.new_context(viewport=viewport)
        self.contexts.append(context)
        page = context.new_page()
        page.on("dialog", lambda d: (self.errors.append(f"dialog: {d.message}"), d.dismiss()))
        page.on("pageerror", lambda e: self.errors.append(f"{e} at {page.url}"))
        page.goto(server.url + "/login/")
        page.fill("input[name=username]", self.users[who].username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(server.url + "/")
        return page

    def shoot(self, page: Any, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"presence-{name}.png"), full_page=True)

    def test_presence_claim_release_and_leaving_reach_the_other_page_live(self) -> None:
        events_before = None
        alice = self.login("reviewer", self.servers[0], DESKTOP)
        bob = self.login("teammate", self.servers[1], PHONE)
        s = pending_of(start(self.api, "payer"))
        a_card, b_card = card(alice, s), card(bob, s)
        expect(a_card).to_be_visible()
        expect(b_card).to_be_visible()
        events_before = Event.objects.count()

        # Presence: each sees the other looking at the card.
        expect(a_card.locator(".viewers .names")).to_have_text(self.bob_name)
        expect(a_card.locator(".viewers .face")).to_have_text("SO")
        assert a_card.locator(".viewers b").count() == 0  # text, not markup
        expect(b_card.locator(".viewers .names")).to_have_text("Dana")

        # Alice claims: Bob's page says so at once; Bob may not claim it, but may still decide.
        a_card.get_by_role("button", name="Claim").click()
        expect(a_card.locator(".claim-line")).to_have_text("You are reviewing (claimed just now)")
        expect(b_card.locator(".claim-line")).to_have_text("Dana is reviewing (claimed just now)")
        expect(b_card.get_by_role("button", name="Claim")).to_be_hidden()
        expect(b_card.get_by_role("button", name="Approve", exact=True)).to_be_enabled()
        expect(a_card.get_by_role("button", name="Release")).to_be_visible()
        self.shoot(alice, "alice-desktop-claimed")
        self.shoot(bob, "bob-phone-sees-claim")

        # Release: gone from Bob's card, and Bob may claim it now.
        a_card.get_by_role("button", name="Release").click()
        expect(b_card.locator(".claim-line")).to_be_hidden()
        expect(b_card.get_by_role("button", name="Claim")).to_be_visible()

        # Claimed again, then Alice closes her page: the claim and her presence go.
        a_card.get_by_role("button", name="Claim").click()
        expect(b_card.locator(".claim-line")).to_have_text("Dana is reviewing (claimed just now)")
        alice.close()
        expect(b_card.locator(".claim-line")).to_be_hidden()
        expect(b_card.locator(".viewers")).to_be_hidden()
        assert not Claim.objects.exists()

        # Nothing of this is an audit fact.
        assert Event.objects.count() == events_before

    def test_a_claim_lapses_live_and_the_other_still_decides(self) -> None:
        alice = self.login("reviewer", self.servers[0], PHONE)
        bob = self.login("teammate", self.servers[1], DESKTOP)
        s = pending_of(start(self.api, "payer"))
        a_card = card(alice, s)
        expect(a_card).to_be_visible()
        a_card.get_by_role("button", name="Claim").click()
        expect(a_card.locator(".claim-line")).to_have_text("You are reviewing (claimed just now)")

        # A page opened after the claim (Bob's thread page) shows it at once.
        bob.goto(self.servers[1].url + f"/threads/{s.thread_id}/")
        b_card = card(bob, s)
        expect(b_card.locator(".claim-line")).to_have_text(
            "Dana is reviewing (claimed just now)", timeout=3000
        )
        expect(b_card.locator(".viewers .names")).to_have_text("Dana")
        expect(a_card.locator(".viewers .names")).to_have_text(self.bob_name)
        self.shoot(alice, "alice-phone-claimed")
        self.shoot(bob, "bob-desktop-thread-sees-claim")

        # CLAIM_SECONDS later it lapses on both pages, with nobody doing anything.
        expect(b_card.locator(".claim-line")).to_be_hidden(timeout=(CLAIM_SECONDS + 5) * 1000)
        expect(a_card.locator(".claim-line")).to_be_hidden()
        expect(a_card.get_by_role("button", name="Claim")).to_be_visible()

        # Alice claims again; Bob decides anyway, and the claim ends with the request.
        a_card.get_by_role("button", name="Claim").click()
        expect(b_card.locator(".claim-line")).to_have_text("Dana is reviewing (claimed just now)")
        b_card.get_by_role("button", name="Approve", exact=True).click()
        expect(alice.locator(f"#gone-{s.id} .outcome")).to_have_text("approved by bob")
        expect(a_card).to_have_count(0)
        expect(a_card.locator(".presence")).to_be_hidden()
        s.refresh_from_db()
        assert s.status == Suspension.Status.APPROVED and s.decided_by.username == "bob"

    def test_who_may_not_decide_sees_who_reviews_but_has_no_claim_button(self) -> None:
        from tests.e2e.conftest import HttpApi

        # Alice starts the run, so she may not decide it (four eyes): her card is read-only.
        mine = HttpApi(self.servers[0].url, self.users["reviewer"])
        r = mine.post("/api/threads", {"agent": "payer", "message": "go"})
        assert r.status_code == 201, r.content
        s = pending_of(r.json()["id"])
        alice = self.login("reviewer", self.servers[0], DESKTOP)
        bob = self.login("teammate", self.servers[1], DESKTOP)
        a_card, b_card = card(alice, s), card(bob, s)
        expect(a_card).to_have_class(re.compile(r"\bread-only\b"))
        expect(a_card.locator(".viewers .names")).to_have_text(self.bob_name)
        expect(a_card.get_by_role("button", name="Claim")).to_be_hidden()
        b_card.get_by_role("button", name="Claim").click()
        expect(a_card.locator(".claim-line")).to_have_text(
            f"{self.bob_name} is reviewing (claimed just now)"
        )
        self.shoot(alice, "alice-desktop-read-only-sees-claim")
