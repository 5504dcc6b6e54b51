"""Passkey step-up (the `step_up` policy key): approving such a request needs a passkey's
assertion, made on the page (approvals.stepup) and verified (access.passkeys). The API cannot
carry one, so its approvals are refused with words that point to the page; a rejection needs
none; a forged, replayed or misdirected assertion approves nothing. Registering and removing a
passkey (the account page) are audited."""

import json
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from access.models import Passkey
from agents import receipts
from agents.chain import verify
from agents.models import AgentDefinition, Event, Suspension
from agents.rules import PolicyError, check_policy
from tests.approvals import state
from tests.approvals.state import resume_url
from tests.conftest import Api
from tests.passkey_device import Device


def step_up(agent: str = "payer") -> None:
    """transfer_funds of `agent` asks for a step-up (made before the suspension, which keeps
    its policy)."""
    state.agent(agent)
    AgentDefinition.objects.filter(name=agent).update(
        policy={"tools": {"transfer_funds": {"step_up": True}}}
    )


class Page:
    """A reviewer's browser session: the account page's and the card's JSON calls."""

    def __init__(self, user: Any) -> None:
        self.client = Client()
        self.client.force_login(user)

    def post(self, path: str, data: Any = None) -> Any:
        return self.client.post(path, json.dumps(data or {}), content_type="application/json")

    def register(self, device: Device, name: str = "Laptop") -> Any:
        options = self.post("/account/passkeys/options")
        assert options.status_code == 200, options.content
        return self.post(
            "/account/passkeys", {"name": name, "credential": device.create(options.json())}
        )

    def options(self, s: Suspension) -> Any:
        return self.post(f"/threads/{s.thread_id}/suspensions/{s.pk}/step-up/options")

    def approve(self, s: Suspension, assertion: dict[str, Any], **decision: Any) -> Any:
        body = {"decision": {"approved": True, **decision}, "assertion": assertion}
        return self.post(f"/threads/{s.thread_id}/suspensions/{s.pk}/step-up/resume", body)


def device() -> Device:
    return Device(settings.PASSKEY_RP_ID, settings.PASSKEY_ORIGINS[0])


def decided(s: Suspension) -> list[Event]:
    return list(Event.objects.filter(suspension=s, type=Event.Type.SUSPENSION_DECIDED))


class PasskeyAccountTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.alice = Page(users["reviewer"])

    def test_a_reviewer_registers_a_passkey_and_removes_it_both_audited(self) -> None:
        key = device()
        r = self.alice.register(key, "Laptop")
        assert r.status_code == 201, r.content
        [row] = Passkey.objects.filter(user=self.users["reviewer"])
        assert (row.name, row.credential_id) == ("Laptop", key.id)
        page = self.alice.client.get("/account/")
        assert page.status_code == 200 and b"Laptop" in page.content
        # Someone else cannot remove it; its owner can.
        Page(self.users["teammate"]).client.post(f"/account/passkeys/{row.pk}/remove")
        assert Passkey.objects.filter(pk=row.pk).exists()
        assert self.alice.client.post(f"/account/passkeys/{row.pk}/remove").status_code == 302
        assert not Passkey.objects.filter(pk=row.pk).exists()
        trail = Event.objects.filter(type__startswith="PASSKEY_").order_by("id")
        assert [(e.type, e.actor_name, e.payload["credential"]) for e in trail] == [
            ("PASSKEY_REGISTERED", "alice", key.id),
            ("PASSKEY_REMOVED", "alice", key.id),
        ]
        assert verify().breaks == []

    def test_an_answer_to_no_challenge_or_for_another_origin_registers_nothing(self) -> None:
        key = device()
        options = self.alice.post("/account/passkeys/options").json()
        answer = key.create(options)
        assert (
            self.alice.post("/account/passkeys", {"name": "A", "credential": answer}).status_code
            == 201
        )
        # The same answer again: its challenge was spent.
        again = self.alice.post("/account/passkeys", {"name": "B", "credential": answer})
        assert again.status_code == 400 and again.json()["error"] == "passkey_refused"
        phished = Device(settings.PASSKEY_RP_ID, "https://gateway.example.net")
        options = self.alice.post("/account/passkeys/options").json()
        r = self.alice.post(
            "/account/passkeys", {"name": "C", "credential": phished.create(options)}
        )
        assert r.status_code == 400 and r.json()["error"] == "passkey_refused"
        assert Passkey.objects.count() == 1

    def test_the_admin_lists_passkeys_read_only(self) -> None:
        assert self.alice.register(device(), "Laptop").status_code == 201
        admin = Client()
        admin.force_login(self.users["admin"])
        listed = admin.get("/admin/access/passkey/")
        assert listed.status_code == 200 and b"Laptop" in listed.content
        assert admin.get("/admin/access/passkey/add/").status_code == 403

    def test_only_reviewers_have_the_page(self) -> None:
        outsider = Page(self.users["outsider"])
        assert outsider.client.get("/account/").status_code == 403
        assert outsider.post("/account/passkeys/options").status_code == 403
        assert Client().get("/account/").status_code == 302  # to the login page


class StepUpTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        step_up()
        self.users = users
        self.api = api("reviewer")
        self.alice = Page(users["reviewer"])
        self.key = device()
        assert self.alice.register(self.key).status_code == 201
        _, [self.s] = state.suspended(users["operator"])

    def test_an_api_approval_is_refused_with_the_page_named_and_a_rejection_is_not(self) -> None:
        for body in (
            {"approved": True},
            {"approved": True, "modifiedArgs": {**state.TRANSFER, "amount": 5}},
        ):
            r = self.api.post(resume_url(self.s), body)
            assert r.status_code == 403, r.content
            assert r.json()["error"] == "forbidden_by_policy" and r.json()["rule"] == "step_up"
            assert f"/threads/{self.s.thread_id}/#s-{self.s.pk}" in r.json()["detail"]
            assert "passkey" in r.json()["detail"]
        # Nor can a body bring its own proof: the key is not part of the API.
        r = self.api.post(
            resume_url(self.s), {"approved": True, "step_up": {"credential": self.key.id}}
        )
        assert r.status_code == 400
        many = self.api.post(
            "/api/decisions",
            {"decisions": [{"suspension": str(self.s.pk), "decision": {"approved": True}}]},
        )
        assert many.json()["results"][0]["status"] == 403
        self.s.refresh_from_db()
        assert self.s.status == "pending" and decided(self.s) == []
        # The card says so, and the API shows it in the policy.
        assert self.api.get(f"/api/suspensions/{self.s.pk}").json()["policy"]["step_up"] is True
        r = self.api.post(resume_url(self.s), {"approved": False, "reason": "Not this month."})
        assert r.status_code == 202, r.content
        self.s.refresh_from_db()
        assert self.s.status == "rejected"
        assert "passkey" not in decided(self.s)[0].payload

    def test_the_page_approves_with_the_passkey_and_the_trail_names_it(self) -> None:
        options = self.alice.options(self.s)
        assert options.status_code == 200
        assert [d["id"] for d in options.json()["allowCredentials"]] == [self.key.id]
        r = self.alice.approve(self.s, self.key.get(options.json()))
        assert r.status_code == 202, r.content
        self.s.refresh_from_db()
        assert (self.s.status, self.s.decided_by_name) == ("approved", "alice")
        [event] = decided(self.s)
        assert event.payload["passkey"] == {"credential": self.key.id, "name": "Laptop"}
        # The signed receipt says so too (agents.receipts), checked with the published keys.
        jwks = self.alice.client.get("/.well-known/jwks.json").json()
        claims = receipts.verify(self.s.receipt, jwks)
        assert claims["decider"]["passkey"] == {"credential": self.key.id, "name": "Laptop"}
        row = Passkey.objects.get(credential_id=self.key.id)
        assert row.sign_count == 1 and row.last_used_at is not None

    def test_the_thread_and_audit_pages_say_which_passkey_signed_it(self) -> None:
        # A second passkey whose name (the reviewer's own text) holds markup and an override.
        work = device()
        assert self.alice.register(work, "Work <b>key</b>\u202e").status_code == 201
        r = self.alice.approve(self.s, work.get(self.alice.options(self.s).json()))
        assert r.status_code == 202, r.content
        named = 'with the passkey &#x27;Work &lt;b&gt;key&lt;/b&gt;<span class="ctl">[U+202E]'
        thread = self.alice.client.get(f"/threads/{self.s.thread_id}/").content.decode()
        # The card's outcome line, and the transcript's line of the decision.
        assert f"approved by alice {named}" in thread
        assert f"approved transfer_funds {named}" in thread
        card = self.alice.client.get(f"/fragments/suspensions/{self.s.pk}/card")
        assert f"approved by alice {named}" in card.content.decode()
        staff = Client()
        staff.force_login(self.users["admin"])
        audit = staff.get("/audit/").content.decode()
        # The row's decider, and the timeline's Decided step.
        assert f'<span class="reviewer">alice</span><span class="signed-with"> {named}' in audit
        assert f"approved {named}" in audit
        for html in (thread, audit):
            assert "<b>key</b>" not in html and "\u202e" not in html

    def test_an_edit_is_approved_with_the_passkey_too(self) -> None:
        edited = {**state.TRANSFER, "amount": 150}
        answer = self.key.get(self.alice.options(self.s).json())
        r = self.alice.approve(self.s, answer, modifiedArgs=edited)
        assert r.status_code == 202, r.content
        self.s.refresh_from_db()
        assert (self.s.status, self.s.modified_args) == ("approved", edited)
        assert decided(self.s)[0].payload["passkey"]["credential"] == self.key.id

    def test_an_expired_challenge_approves_nothing(self, settings: Any) -> None:
        settings.PASSKEY_CHALLENGE_SECONDS = -1
        answer = self.key.get(self.alice.options(self.s).json())
        r = self.alice.approve(self.s, answer)
        assert r.status_code == 403 and "expired" in r.json()["detail"]
        self.s.refresh_from_db()
        assert self.s.status == "pending"

    def test_a_replayed_assertion_approves_nothing(self) -> None:
        _, [other] = state.suspended(self.users["operator"])
        answer = self.key.get(self.alice.options(self.s).json())
        assert self.alice.approve(self.s, answer).status_code == 202
        # Sent again, for the same request or another: no challenge waits for it.
        self.alice.options(other)
        r = self.alice.approve(other, answer)
        assert r.status_code == 403 and r.json()["error"] == "passkey_refused"
        other.refresh_from_db()
        assert other.status == "pending" and decided(other) == []

    def test_a_forged_or_misdirected_assertion_approves_nothing(self) -> None:
        _, [other] = state.suspended(self.users["operator"])
        # Signed by another key under the registered credential's id.
        forger = device()
        forger.credential_id = self.key.credential_id
        forger.count = 5
        r = self.alice.approve(self.s, forger.get(self.alice.options(self.s).json()))
        assert r.status_code == 403 and r.json()["error"] == "passkey_refused"
        # A signature over the challenge given for another request.
        answer = self.key.get(self.alice.options(other).json())
        r = self.alice.approve(self.s, answer)
        assert r.status_code == 403 and r.json()["error"] == "passkey_refused"
        # Someone else's passkey.
        bob, bobs = Page(self.users["teammate"]), device()
        assert bob.register(bobs).status_code == 201
        bob.options(self.s)
        answer = bobs.get(self.alice.options(self.s).json() | {"allowCredentials": []})
        r = bob.approve(self.s, answer)
        assert r.status_code == 403 and r.json()["error"] == "passkey_refused"
        self.s.refresh_from_db()
        assert self.s.status == "pending" and decided(self.s) == []

    def test_without_a_passkey_the_page_cannot_approve(self) -> None:
        bob = Page(self.users["teammate"])
        r = bob.options(self.s)
        assert r.status_code == 403 and r.json()["error"] == "no_passkey"
        assert "account page" in r.json()["detail"]
        fake = device()
        r = bob.approve(self.s, fake.get({"challenge": "AAAA", "allowCredentials": []}))
        assert r.status_code == 403
        self.s.refresh_from_db()
        assert self.s.status == "pending"

    def test_a_bearer_token_does_not_reach_the_page_s_endpoints(self) -> None:
        path = f"/threads/{self.s.thread_id}/suspensions/{self.s.pk}/step-up/options"
        r = self.api.post(path, {})
        assert r.status_code == 401

    def test_the_page_s_endpoints_check_csrf(self) -> None:
        page = Client(enforce_csrf_checks=True)
        page.force_login(self.users["reviewer"])
        for path in ("step-up/options", "step-up/resume"):
            url = f"/threads/{self.s.thread_id}/suspensions/{self.s.pk}/{path}"
            assert page.post(url, "{}", content_type="application/json").status_code == 403
        assert page.post("/account/passkeys/options").status_code == 403


def test_step_up_is_a_policy_key_of_true_or_false() -> None:
    checked = check_policy({"tools": {"transfer_funds": {"step_up": True}}}, "payer.policy")
    assert checked == {"tools": {"transfer_funds": {"step_up": True}}}
    with pytest.raises(PolicyError, match=r"payer.policy.step_up: true or false"):
        check_policy({"step_up": "yes"}, "payer.policy")


class StepUpQuorumTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        state.agent("payer")
        AgentDefinition.objects.filter(name="payer").update(
            policy={"tools": {"transfer_funds": {"step_up": True, "quorum": 2}}}
        )
        self.users = users
        _, [self.s] = state.suspended(users["operator"])

    def test_each_vote_of_a_quorum_needs_a_passkey(self) -> None:
        votes = []
        for who in ("reviewer", "teammate"):
            page, key = Page(self.users[who]), device()
            assert page.register(key).status_code == 201
            assert (
                Api(self.users[who]).post(resume_url(self.s), {"approved": True}).status_code == 403
            )
            r = page.approve(self.s, key.get(page.options(self.s).json()))
            assert r.status_code == 202, r.content
            votes.append(key.id)
        voted = Event.objects.filter(suspension=self.s, type=Event.Type.SUSPENSION_VOTED)
        assert [e.payload["passkey"]["credential"] for e in voted.order_by("id")] == votes
        self.s.refresh_from_db()
        assert self.s.status == "approved"
        assert decided(self.s)[0].payload["passkey"]["credential"] == votes[1]
