"""Standing grants (agents.grants): a reviewer approves a request and grants the next similar
ones; they are approved at once, by the grant, until its count or lifetime ends, then wait for
a person again. The policy bounds them; revoking stops one at once; of two requests racing for
its last use exactly one wins (each on its own database connection)."""

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from agents import external, grants, policy, receipts
from agents.models import AgentDefinition, Event, Grant, Suspension, Thread
from tests.approvals.test_policy import PolicyTestCase
from tests.external.test_requests_api import Caller, ask

EUR_ONLY = {"arg": "currency", "op": "==", "value": "EUR"}
EUR_UNDER_500 = [
    {"arg": "currency", "op": "==", "value": "EUR"},
    {"arg": "amount", "op": "<", "value": 500},
]


def pay(n: int, amount: int = 120, currency: str = "EUR", **over: Any) -> dict[str, Any]:
    return ask(
        arguments={"amount": amount, "currency": currency, "to": "ACME"},
        schema={"type": "object"},
        idempotency_key=f"pay-{n}",
        **over,
    )


class GrantsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.agent = Caller(users["operator"], "runs")
        self.reviewer = Caller(users["reviewer"], "decide")
        self.n = 0

    def request(self, **over: Any) -> dict[str, Any]:
        self.n += 1
        r = self.agent.post("/api/requests", pay(self.n, **over))
        assert r.status_code in (200, 201), r.content
        return r.json()

    def resume(self, body: dict[str, Any], decision: dict[str, Any], who: Any = None) -> Any:
        path = f"/api/threads/{body['thread']}/suspensions/{body['id']}/resume"
        return (who or self.reviewer).post(path, decision)

    def grant(self, seconds: int = 3600, max_uses: int = 2, **terms: Any) -> dict[str, Any]:
        """Approve a first request and grant the next ones; the grant as answered."""
        first = self.request()
        body = {"seconds": seconds, "max_uses": max_uses, "conditions": EUR_UNDER_500, **terms}
        r = self.resume(first, {"approved": True, "grant": body})
        assert r.status_code == 202, r.content
        assert r.json()["outcome"]["status"] == "approved"
        return r.json()["grant"]

    def test_a_grant_approves_the_next_matching_requests_until_its_count_ends(self) -> None:
        made = self.grant(max_uses=2)
        assert made["state"] == "active" and made["granted_by"] == "alice"
        assert made["conditions_text"] == 'currency == "EUR" and amount < 500'
        created = Event.objects.get(type=Event.Type.GRANT_CREATED)
        assert created.actor_name == "alice" and created.payload["id"] == made["id"]
        for left in (1, 0):
            body = self.request()
            assert body["status"] == "approved", body
            s = Suspension.objects.get(pk=body["id"])
            assert s.decided_by_name == "grant" and s.decided_by is None
            types = list(
                Event.objects.filter(suspension=s).order_by("id").values_list("type", flat=True)
            )
            assert types == ["AGENT_SUSPENDED", "SUSPENSION_DECIDED", "GRANT_USED"]
            suspended, decided, used = Event.objects.filter(suspension=s).order_by("id")
            assert suspended.payload["status"] == "pending"
            assert decided.payload["grant"] == {"id": made["id"], "granted_by": "alice"}
            assert decided.payload["by"] == "grant" and decided.payload["decided_by"] == "grant"
            assert decided.actor is None and used.payload["left"] == left
            assert body["policy"]["grant"]["id"] == made["id"]
            # Its signed receipt names the grant and its maker (agents.receipts).
            jwks = self.reviewer.get("/.well-known/jwks.json").json()
            decider = receipts.verify(decided.payload["receipt"], jwks)["decider"]
            assert decider == {"kind": "grant", "grant": made["id"], "granted_by": "alice"}
        # Its count is spent: the next one waits for a person.
        assert self.request()["status"] == "pending"
        assert Grant.objects.get(pk=made["id"]).uses == 2
        listed = self.reviewer.get("/api/grants").json()["grants"]
        assert listed == []
        [every] = self.reviewer.get("/api/grants", state="all").json()["grants"]
        assert every["state"] == "used_up" and every["left"] == 0
        # The sweeper records that it ran out, once.
        assert grants.expire_all() == 1 and grants.expire_all() == 0
        ended = Event.objects.get(type=Event.Type.GRANT_EXPIRED)
        assert ended.payload["why"] == "used_up"

    def test_its_lifetime_ends_it(self) -> None:
        made = self.grant(seconds=60, max_uses=10)
        assert self.request()["status"] == "approved"
        Grant.objects.filter(pk=made["id"]).update(expires_at=timezone.now())
        assert self.request()["status"] == "pending"
        assert grants.expire_all() == 1
        ended = Event.objects.get(type=Event.Type.GRANT_EXPIRED)
        assert ended.payload["why"] == "lifetime" and ended.payload["id"] == made["id"]

    def test_the_sweeper_records_the_end(self) -> None:
        from agents import tasks

        made = self.grant(seconds=60, max_uses=10)
        assert tasks.sweep()["grants_ended"] == 0
        Grant.objects.filter(pk=made["id"]).update(expires_at=timezone.now())
        assert tasks.sweep()["grants_ended"] == 1
        assert tasks.sweep()["grants_ended"] == 0
        [ended] = Event.objects.filter(type=Event.Type.GRANT_EXPIRED)
        assert ended.thread_id is None and ended.actor is None
        assert ended.payload["state"] == "expired"

    def test_a_request_whose_arguments_do_not_match_waits(self) -> None:
        self.grant(max_uses=5)
        assert self.request(amount=900)["status"] == "pending"
        assert self.request(currency="USD")["status"] == "pending"
        assert self.request(tool="refund")["status"] == "pending"
        assert self.request(agent="other-bot")["status"] == "pending"
        assert self.request()["status"] == "approved"

    def test_revoke_stops_it_at_once(self) -> None:
        made = self.grant(max_uses=5)
        assert self.request()["status"] == "approved"
        r = self.reviewer.post(f"/api/grants/{made['id']}/revoke")
        assert r.status_code == 200 and r.json()["revoked"] is True
        assert r.json()["grant"]["state"] == "revoked"
        assert self.request()["status"] == "pending"
        again = self.reviewer.post(f"/api/grants/{made['id']}/revoke").json()
        assert again["revoked"] is False
        [revoked] = Event.objects.filter(type=Event.Type.GRANT_REVOKED)
        assert revoked.actor_name == "alice" and revoked.payload["revoked_by"] == "alice"
        assert grants.expire_all() == 0  # revoked, not expired

    def test_who_may_list_and_revoke(self) -> None:
        made = self.grant()
        outsider = Caller(self.users["outsider"], "decide")
        assert outsider.get("/api/grants").status_code == 403
        assert outsider.post(f"/api/grants/{made['id']}/revoke").status_code == 403
        reader = Caller(self.users["teammate"], "runs")
        assert reader.post(f"/api/grants/{made['id']}/revoke").status_code == 403
        assert self.agent.get("/api/grants").status_code == 403
        assert Grant.objects.get(pk=made["id"]).revoked_at is None

    def test_the_page_lists_and_revokes_and_the_admin_only_shows(self, client: Any) -> None:
        made = self.grant()
        client.force_login(self.users["teammate"])
        page = client.get("/grants/").content.decode()
        assert f'id="g-{made["id"]}"' in page and "currency == &quot;EUR&quot;" in page
        r = client.post(f"/grants/{made['id']}/revoke")
        assert r.status_code == 302
        revoked = Grant.objects.get(pk=made["id"])
        assert revoked.revoked_at is not None and revoked.revoked_by_name == "bob"
        client.force_login(self.users["outsider"])
        assert client.get("/grants/").status_code == 403
        client.force_login(self.users["admin"])
        assert client.get("/admin/agents/grant/").status_code == 200
        assert client.get("/admin/agents/grant/add/").status_code == 403

    def test_the_trail_and_the_audit_page_name_the_grant(self, client: Any) -> None:
        made = self.grant()
        body = self.request()
        client.force_login(self.users["admin"])
        page = client.get("/audit/").content.decode()
        assert "Grant made" in page and "Grant used" in page
        assert f"grant {made['id']}" in page
        thread = client.get(f"/threads/{body['thread']}/").content.decode()
        assert f"grant {made['id'][:8]} by alice" in thread

    def test_a_grant_for_one_run_or_one_requester(self) -> None:
        self.grant(max_uses=5, scope="run")
        assert self.request(run_id="run-2")["status"] == "pending"
        assert self.request()["status"] == "approved"  # run-1, the grant's
        Grant.objects.all().delete()
        self.grant(max_uses=5, scope="requester")
        assert self.request(run_id="run-3")["status"] == "approved"
        other = Caller(self.users["admin"], "runs")
        r = other.post("/api/requests", pay(99, run_id="run-4"))
        assert r.json()["status"] == "pending"

    def test_its_terms_are_checked(self, settings: Any) -> None:
        settings.MAX_GRANT_SECONDS = 600
        first = self.request()
        for terms, field in (
            ({"seconds": 601, "max_uses": 1}, "grant.seconds"),
            ({"seconds": 60, "max_uses": 0}, "grant.max_uses"),
            ({"seconds": 60, "max_uses": 1, "conditions": [{"arg": "x"}]}, "grant.conditions"),
            ({"seconds": 60, "max_uses": 1, "scope": "world"}, "grant.scope"),
        ):
            r = self.resume(first, {"approved": True, "grant": terms})
            assert r.status_code == 400, r.content
            assert field in r.json()["fields"], r.json()
        r = self.resume(first, {"approved": False, "grant": {"seconds": 60, "max_uses": 1}})
        assert r.status_code == 400
        assert Suspension.objects.get(pk=first["id"]).status == "pending"
        assert not Grant.objects.exists()


class GrantPolicyTestCase:
    """What the policy says: a quorum or step-up tool cannot be granted, nor one whose policy
    says allow_grants: false; four eyes keeps a grant off its maker's own runs."""

    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.agent = Caller(users["operator"], "runs")
        self.reviewer = Caller(users["reviewer"], "decide")

    def refused(self, agent_policy: dict[str, Any], rule: str) -> None:
        AgentDefinition.objects.create(name="billing-bot", model="external", policy=agent_policy)
        first = self.agent.post("/api/requests", pay(1)).json()
        path = f"/api/threads/{first['thread']}/suspensions/{first['id']}/resume"
        r = self.reviewer.post(path, {"approved": True, "grant": {"seconds": 60, "max_uses": 3}})
        assert r.status_code == 403, r.content
        assert r.json()["error"] == "forbidden_by_policy" and r.json()["rule"] == rule
        # Nothing happened: the request still waits, and no grant was made.
        assert Suspension.objects.get(pk=first["id"]).status == "pending"
        assert not Grant.objects.exists()

    def test_a_quorum_tool_refuses_grants(self) -> None:
        self.refused({"quorum": 2}, "quorum")

    def test_allow_grants_false_refuses_them(self) -> None:
        self.refused({"tools": {"pay": {"allow_grants": False}}}, "allow_grants")

    def test_a_step_up_tool_refuses_grants(self) -> None:
        # The step_up key is the passkey step-up's (issue 28, point 3); read with .get here.
        assert grants.barred({"quorum": 1, "step_up": True})[0] == "step_up"
        agent = external.agent_for("billing-bot", self.users["operator"])
        first = self.agent.post("/api/requests", pay(1)).json()
        Suspension.objects.filter(pk=first["id"]).update(
            policy={**policy.DEFAULTS, "step_up": True}
        )
        path = f"/api/threads/{first['thread']}/suspensions/{first['id']}/resume"
        r = self.reviewer.post(path, {"approved": True, "grant": {"seconds": 60, "max_uses": 3}})
        assert r.status_code == 403 and r.json()["rule"] == "step_up"
        # Nor does a grant made before apply to a tool that needs step-up.
        Grant.objects.create(
            agent_name=agent.name,
            tool_name="pay",
            max_uses=5,
            created_by=self.users["reviewer"],
            expires_at=timezone.now() + timedelta(hours=1),
        )
        thread = Thread.objects.get(pk=first["thread"])
        in_force = {**policy.DEFAULTS, "step_up": True}
        assert grants.decide_by_grant(agent.name, "pay", {}, in_force, thread) is None
        assert grants.decide_by_grant(agent.name, "pay", {}, policy.DEFAULTS, thread)

    def test_four_eyes_forbids_granting_on_ones_own_runs(self) -> None:
        alice = Caller(self.users["reviewer"], "runs", "decide")
        own = alice.post("/api/requests", pay(1, run_id="alice-run")).json()
        path = f"/api/threads/{own['thread']}/suspensions/{own['id']}/resume"
        r = alice.post(path, {"approved": True, "grant": {"seconds": 60, "max_uses": 3}})
        assert r.status_code == 403 and r.json()["rule"] == "four_eyes"
        assert not Grant.objects.exists()
        # A grant alice makes on someone else's run does not approve her own runs' requests.
        theirs = self.agent.post("/api/requests", pay(2)).json()
        path = f"/api/threads/{theirs['thread']}/suspensions/{theirs['id']}/resume"
        r = alice.post(path, {"approved": True, "grant": {"seconds": 60, "max_uses": 3}})
        assert r.status_code == 202, r.content
        assert alice.post("/api/requests", pay(3, run_id="alice-run")).json()["status"] == (
            "pending"
        )
        assert self.agent.post("/api/requests", pay(4)).json()["status"] == "approved"

    def test_allow_grants_is_a_policy_key(self) -> None:
        from agents.rules import PolicyError, check_policy

        assert check_policy({"allow_grants": False}, "p") == {"allow_grants": False}
        with pytest.raises(PolicyError):
            check_policy({"allow_grants": "no"}, "p")


class ProposalTestCase:
    """After three identical approvals by people within a day, the card of the next such
    request proposes a grant; nothing is granted until someone clicks."""

    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.agent = Caller(users["operator"], "runs")
        self.reviewer = Caller(users["reviewer"], "decide")

    def test_the_card_proposes_a_grant_after_three_identical_approvals(self, client: Any) -> None:
        client.force_login(self.users["teammate"])
        viewer = policy.Viewer.of(self.users["teammate"])
        for n in range(1, 4):
            body = self.agent.post("/api/requests", pay(n)).json()
            s = Suspension.objects.get(pk=body["id"])
            assert grants.proposal(s, viewer) is None
            html = client.get(f"/fragments/suspensions/{s.pk}/card").content.decode()
            assert "grant-proposal" not in html
            path = f"/api/threads/{body['thread']}/suspensions/{body['id']}/resume"
            assert self.reviewer.post(path, {"approved": True}).status_code == 202
        # An approval of other arguments does not count.
        other = self.agent.post("/api/requests", pay(9, amount=121)).json()
        s = Suspension.objects.get(pk=other["id"])
        assert grants.proposal(s, viewer) is None
        fourth = Suspension.objects.get(pk=self.agent.post("/api/requests", pay(4)).json()["id"])
        found = grants.proposal(fourth, viewer)
        assert found is not None and found["approvals"] == 3
        assert {"arg": "currency", "op": "==", "value": "EUR"} in found["conditions"]
        html = client.get(f"/fragments/suspensions/{fourth.pk}/card").content.decode()
        assert "grant-proposal" in html and "approved 3 times" in html
        assert not Grant.objects.exists()
        assert Suspension.objects.get(pk=fourth.pk).status == "pending"
        # Older than a day, they no longer count.
        Suspension.objects.filter(status="approved").update(
            decided_at=timezone.now() - timedelta(days=1, minutes=1)
        )
        assert grants.proposal(fourth, viewer) is None


class GrantRaceTestCase:
    """The last use, raced by two requests each in a transaction on its own connection."""

    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], transactional_db: Any) -> None:
        self.users = users
        self.agent = external.agent_for("billing-bot", users["operator"])
        self.g = Grant.objects.create(
            agent_name="billing-bot",
            tool_name="pay",
            max_uses=1,
            created_by=users["reviewer"],
            created_by_name="alice",
            expires_at=timezone.now() + timedelta(hours=1),
        )

    def raise_one(self, n: int) -> Suspension:
        request = external.Request(
            agent="billing-bot",
            run_id=f"run-{n}",
            tool="pay",
            arguments={"amount": 120, "currency": "EUR"},
            schema={"type": "object"},
            prompt="",
            kind="confirmation",
            timeout=600,
            on_timeout="reject",
            key=f"k-{n}",
        )
        return external.raise_request(self.agent, self.agent, request, self.users["operator"])

    def test_the_second_waits_for_the_first_and_loses(self) -> None:
        """A holds the last use in an open transaction; B's UPDATE waits for A's commit and
        then finds the count spent."""
        spent, took, results = threading.Event(), {}, {}

        def first() -> None:
            try:
                with transaction.atomic():
                    results["a"] = self.raise_one(1).status
                    spent.set()
                    time.sleep(0.5)  # B comes now, while A has not committed
            finally:
                spent.set()
                connection.close()

        def second() -> None:
            try:
                spent.wait(10)
                started = time.monotonic()
                results["b"] = self.raise_one(2).status
                took["b"] = time.monotonic() - started
            finally:
                connection.close()

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == {"a": "approved", "b": "pending"}
        assert took["b"] > 0.3  # it waited for A's transaction rather than reading past it
        assert Grant.objects.get(pk=self.g.pk).uses == 1
        assert Event.objects.filter(type=Event.Type.GRANT_USED).count() == 1

    @pytest.mark.parametrize("round_", range(3))
    def test_of_two_at_once_exactly_one_wins(self, round_: int) -> None:
        barrier = threading.Barrier(2)
        results: list[Any] = [None, None]

        def run(i: int) -> None:
            try:
                barrier.wait()
                results[i] = self.raise_one(i + 1).status
            except Exception as e:
                results[i] = e
            finally:
                connection.close()

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == ["approved", "pending"], results
        assert Grant.objects.get(pk=self.g.pk).uses == 1
        assert Event.objects.filter(type=Event.Type.GRANT_USED).count() == 1


class EngineGrantTestCase(PolicyTestCase):
    """An agent's blocking call (agents.suspending) is approved by a grant as by a rule:
    raised pending, decided by the grant, and the run goes on without waiting."""

    def test_a_granted_call_does_not_stop_the_run(self) -> None:
        first = self.pending(self.start())
        terms = {"seconds": 600, "max_uses": 1, "conditions": [EUR_ONLY]}
        r = self.decide("reviewer", first, approved=True, grant=terms)
        assert r.status_code == 202, r.content
        thread = self.start()
        s = self.pending(thread)
        assert s.status == Suspension.Status.APPROVED and s.decided_by_name == "grant"
        types = list(Event.objects.filter(suspension=s).values_list("type", flat=True))
        assert types[:3] == ["AGENT_SUSPENDED", "SUSPENSION_DECIDED", "GRANT_USED"]
        assert Thread.objects.get(pk=thread.pk).status == Thread.Status.COMPLETED
        # Its one use is spent: the next run waits.
        assert self.pending(self.start()).status == Suspension.Status.PENDING
