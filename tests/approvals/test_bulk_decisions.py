"""POST /api/decisions: several suspensions decided in one call, each as resumeExecution
decides one (approvals.api.decisions.answer_for, through agents.door.take), each in its own
transaction, answered per item in the request's order."""

import uuid
from typing import Any

import pytest
from django.test import Client

from access import ratelimits
from access.models import ApiToken, Scope
from agents import decisions, receipt_keys, receipts
from agents.hashing import canonical_hash
from agents.models import AgentDefinition, Event, Suspension, Thread, Vote
from approvals.api import bodies
from approvals.api import decisions as views
from tests.approvals import state
from tests.approvals.state import resume_url

URL = "/api/decisions"
FOUR_EYES = "You started this run; someone else must decide it (four eyes)."


def item(s: Suspension | str, **decision: Any) -> dict[str, Any]:
    return {"suspension": str(getattr(s, "pk", s)), "decision": decision}


def pending(user: Any, **kwargs: Any) -> Suspension:
    """One pending suspension, of a run of its own started by `user`."""
    _, [s] = state.suspended(user, **kwargs)
    return s


def status_of(s: Suspension) -> str:
    s.refresh_from_db()
    return s.status


def decided_events(s: Suspension) -> list[Event]:
    return list(Event.objects.filter(suspension=s, type=Event.Type.SUSPENSION_DECIDED))


@pytest.fixture(autouse=True)
def fresh_counters(db: Any) -> None:
    """Redis keeps rate counters between tests (the database's are rolled back)."""
    ratelimits.storage().reset()


class BulkTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.users = users
        self.api = api
        self.clients: dict[str, Any] = {}
        self.alice = self.client("reviewer")

    def client(self, who: str) -> Any:
        """One token per user for the test (a rate limit counts per token)."""
        return self.clients.setdefault(who, self.api(who))

    def post(self, items: list[dict[str, Any]], who: str = "reviewer") -> Any:
        return self.client(who).post(URL, {"decisions": items})

    def results(self, items: list[dict[str, Any]], who: str = "reviewer") -> list[dict]:
        r = self.post(items, who)
        assert r.status_code == 200, r.content
        found = r.json()["results"]
        assert [x["id"] for x in found] == [i["suspension"] for i in items]
        return found


class PerItemTestCase(BulkTestCase):
    def test_one_reason_approves_all_but_the_one_four_eyes_refuses(self) -> None:
        first = pending(self.users["operator"])
        mine = pending(self.users["reviewer"])  # alice's own run: four eyes
        last = pending(self.users["operator"])
        found = self.results(
            [item(s, approved=True, reason="batch ok") for s in (first, mine, last)]
        )
        assert [x["status"] for x in found] == [202, 403, 202]
        refused = found[1]
        assert refused["error"] == "forbidden_by_policy" and refused["rule"] == "four_eyes"
        assert refused["detail"] == FOUR_EYES
        assert "outcome" not in refused
        for x, s in ((found[0], first), (found[2], last)):
            assert x["outcome"]["status"] == "approved" and x["outcome"]["reason"] == "batch ok"
            assert x["outcome"]["decided_by"] == "alice"
            assert x["suspension"]["id"] == str(s.pk)
            assert status_of(s) == Suspension.Status.APPROVED
            assert len(decided_events(s)) == 1
        assert status_of(mine) == Suspension.Status.PENDING and decided_events(mine) == []
        assert Thread.objects.get(pk=mine.thread_id).status == Thread.Status.SUSPENDED
        # The single endpoint refuses it in the same words.
        single = self.alice.post(resume_url(mine), {"approved": True, "reason": "batch ok"})
        assert single.status_code == 403
        assert {k: refused[k] for k in single.json()} == single.json()

    def test_a_mix_of_approvals_and_rejections(self) -> None:
        yes, no = pending(self.users["operator"]), pending(self.users["operator"])
        found = self.results(
            [item(yes, approved=True), item(no, approved=False, reason="wrong supplier")]
        )
        assert [x["status"] for x in found] == [202, 202]
        assert found[1]["outcome"]["status"] == "rejected"
        assert found[1]["outcome"]["reason"] == "wrong supplier"
        yes.refresh_from_db()
        no.refresh_from_db()
        assert (yes.status, yes.approved) == (Suspension.Status.APPROVED, True)
        assert (no.status, no.approved, no.reason) == ("rejected", False, "wrong supplier")
        assert no.decided_by == self.users["reviewer"]

    def test_an_already_decided_one_conflicts_while_the_others_are_decided(self) -> None:
        before, taken, after = (pending(self.users["operator"]) for _ in range(3))
        assert (
            self.client("teammate").post(resume_url(taken), {"approved": True}).status_code == 202
        )
        found = self.results([item(s, approved=False, reason="no") for s in (before, taken, after)])
        assert [x["status"] for x in found] == [202, 409, 202]
        assert found[1]["error"] == "already_decided"
        assert found[1]["detail"] == "bob already decided: approved."
        assert found[1]["outcome"]["status"] == "approved"
        assert status_of(taken) == Suspension.Status.APPROVED
        assert len(decided_events(taken)) == 1
        assert status_of(before) == status_of(after) == Suspension.Status.REJECTED

    def test_the_same_decision_again_answers_200_with_the_recorded_outcome(self) -> None:
        s = pending(self.users["operator"])
        assert self.results([item(s, approved=False, reason="no")])[0]["status"] == 202
        again = self.results([item(s, approved=False, reason="no")])[0]
        assert again["status"] == 200 and again["outcome"]["reason"] == "no"
        assert len(decided_events(s)) == 1

    def test_an_unknown_id_is_not_found_in_its_item(self) -> None:
        s = pending(self.users["operator"])
        nobody = str(uuid.uuid4())
        found = self.results([item(nobody, approved=True), item(s, approved=True)])
        assert found[0] == {
            "id": nobody,
            "status": 404,
            "error": "not_found",
            "detail": "No such suspension.",
        }
        assert found[1]["status"] == 202 and status_of(s) == Suspension.Status.APPROVED

    def test_what_does_not_fit_its_suspension_is_a_400_of_its_own(self) -> None:
        """Approving a question, or edited arguments the tool's schema refuses: the body is
        well formed, the suspension refuses it, as resumeExecution would."""
        question = pending(self.users["operator"], calls=[("ask_user", {"question": "Which?"})])
        payment = pending(self.users["operator"])
        edited = pending(self.users["operator"])
        found = self.results(
            [
                item(question, approved=True),
                item(payment, approved=True),
                item(edited, approved=True, modifiedArgs={"amount": "lots"}),
            ]
        )
        assert [x["status"] for x in found] == [400, 202, 400]
        assert found[0]["error"] == "invalid" and set(found[0]["fields"]) == {"response"}
        assert all(k.startswith("modifiedArgs") for k in found[2]["fields"])
        assert status_of(question) == status_of(edited) == Suspension.Status.PENDING
        assert status_of(payment) == Suspension.Status.APPROVED

    def test_a_stale_view_is_refused_in_its_item(self) -> None:
        stale, fresh = pending(self.users["operator"]), pending(self.users["operator"])
        shown = canonical_hash(state.TRANSFER)
        Suspension.objects.filter(pk__in=[stale.pk, fresh.pk]).update(args_hash=shown)
        found = self.results(
            [
                item(stale, approved=True, seen={"args_hash": "0" * 64}),
                item(fresh, approved=True, seen={"args_hash": shown}),
            ]
        )
        assert [x["status"] for x in found] == [409, 202]
        assert found[0]["error"] == "stale_view" and found[0]["suspension"]["version"]
        assert status_of(stale) == Suspension.Status.PENDING

    def test_an_item_that_fails_leaves_the_others_decided(self, monkeypatch: Any) -> None:
        first, broken, last = (pending(self.users["operator"]) for _ in range(3))
        real = decisions.decide

        def decide(s: Suspension, *args: Any, **kwargs: Any) -> Any:
            if s.pk == broken.pk:
                raise RuntimeError("the database went away")
            return real(s, *args, **kwargs)

        monkeypatch.setattr(decisions, "decide", decide)
        found = self.results([item(s, approved=True) for s in (first, broken, last)])
        assert [x["status"] for x in found] == [202, 500, 202]
        assert found[1]["error"] == "server_error"
        assert status_of(broken) == Suspension.Status.PENDING
        assert status_of(first) == status_of(last) == Suspension.Status.APPROVED


class AuditTestCase(BulkTestCase):
    def test_each_item_records_the_events_a_single_decision_records(self) -> None:
        def trail(s: Suspension) -> list[tuple[str, Any, dict[str, Any]]]:
            rows = Event.objects.filter(thread_id=s.thread_id).exclude(
                type=Event.Type.AGENT_SUSPENDED
            )
            return [
                # The time and the signed receipt (which covers the request's id) differ.
                (
                    e.type,
                    e.actor_id,
                    {k: v for k, v in e.payload.items() if k not in ("decided_at", "receipt")},
                )
                for e in rows.order_by("id")
            ]

        alone = pending(self.users["operator"])
        r = self.alice.post(resume_url(alone), {"approved": False, "reason": "no"})
        assert r.status_code == 202
        listed = [pending(self.users["operator"]) for _ in range(2)]
        found = self.results([item(s, approved=False, reason="no") for s in listed])
        assert [x["status"] for x in found] == [202, 202]
        expected = trail(alone)
        assert [t for t, _, _ in expected][:1] == [Event.Type.SUSPENSION_DECIDED]
        for s in listed:
            assert trail(s) == expected
            s.refresh_from_db()
            assert s.receipt and receipts.verify(s.receipt, receipt_keys.jwks())


class QuorumTestCase(BulkTestCase):
    def test_each_item_of_a_quorum_tool_is_a_vote(self) -> None:
        AgentDefinition.objects.filter(pk=state.agent().pk).update(policy={"quorum": 2})
        one, two = pending(self.users["operator"]), pending(self.users["operator"])
        assert one.policy["quorum"] == 2
        found = self.results([item(s, approved=True, reason="fine") for s in (one, two)])
        assert [x["status"] for x in found] == [202, 202]
        for x, s in zip(found, (one, two), strict=True):
            assert x["outcome"] is None
            assert x["votes"] == {"approvals": 1, "required": 2, "approved_by": ["alice"]}
            assert status_of(s) == Suspension.Status.PENDING
            [voted] = Event.objects.filter(suspension=s, type=Event.Type.SUSPENSION_VOTED)
            assert voted.actor == self.users["reviewer"] and voted.payload["reason"] == "fine"
            assert Vote.objects.filter(suspension=s, user=self.users["reviewer"]).count() == 1
        # Again: alice already voted, per item.
        again = self.results([item(one, approved=True, reason="fine")])
        assert again[0]["status"] == 403 and again[0]["rule"] == "already_voted"
        # Bob's votes complete both.
        found = self.results([item(s, approved=True) for s in (one, two)], who="teammate")
        assert [x["outcome"]["status"] for x in found] == ["approved", "approved"]
        for s in (one, two):
            [decided] = decided_events(s)
            assert decided.payload["approved_by"] == ["alice", "bob"]


class WholeRequestTestCase(BulkTestCase):
    def assert_nothing_decided(self) -> None:
        assert not Event.objects.filter(
            type__in=[Event.Type.SUSPENSION_DECIDED, Event.Type.SUSPENSION_VOTED]
        ).exists()
        assert not Suspension.objects.exclude(status=Suspension.Status.PENDING).exists()

    def refused(self, body: Any) -> dict[str, Any]:
        r = self.alice.post(URL, body)
        assert r.status_code == 400, r.content
        self.assert_nothing_decided()
        return r.json()

    def test_a_token_without_the_decide_scope_is_refused_whole(self) -> None:
        s = pending(self.users["operator"])
        _, raw = ApiToken.issue(self.users["reviewer"], "reader", scopes=[Scope.READ])
        r = Client().post(
            URL,
            {"decisions": [item(s, approved=True)]},
            content_type="application/json",
            headers={"Authorization": f"Bearer {raw}"},
        )
        assert r.status_code == 403, r.content
        assert r.json()["error"] == "insufficient_scope" and r.json()["scope"] == "decide"
        self.assert_nothing_decided()

    def test_an_outsider_is_refused_whole(self) -> None:
        s = pending(self.users["operator"])
        r = self.post([item(s, approved=True)], who="outsider")
        assert r.status_code == 403 and r.json()["error"] == "forbidden"
        self.assert_nothing_decided()

    def test_more_than_100_items_are_refused(self) -> None:
        s = pending(self.users["operator"])
        items = [item(s, approved=True)] + [item(uuid.uuid4(), approved=True) for _ in range(100)]
        body = self.refused({"decisions": items})
        assert body["error"] == "invalid"
        assert body["fields"] == {
            "decisions": "A list of 1 to 100 decisions: {suspension, decision}."
        }
        assert self.results(items[:100])[0]["status"] == 202  # 100 are taken

    def test_an_empty_list_or_none_is_refused(self) -> None:
        for body in ({"decisions": []}, {}, {"decisions": {"a": 1}}):
            assert set(self.refused(body)["fields"]) == {"decisions"}

    def test_a_suspension_listed_twice_is_refused(self) -> None:
        s, other = pending(self.users["operator"]), pending(self.users["operator"])
        items = [
            item(s, approved=True),
            item(other, approved=True),
            item(str(s.pk).upper(), approved=False, reason="no"),
        ]
        body = self.refused({"decisions": items})
        assert body["detail"] == "Each suspension may be listed once."
        assert body["fields"] == {"decisions.2.suspension": "Listed already, as decisions.0."}

    def test_a_malformed_item_is_refused_naming_its_fields(self) -> None:
        s = pending(self.users["operator"])
        body = self.refused(
            {
                "decisions": [
                    item(s, approved=True),
                    {"suspension": "not-an-id", "decision": {"approved": "yes"}},
                    "approve",
                    {"suspension": str(uuid.uuid4())},
                    {**item(uuid.uuid4(), approved=True), "note": "x"},
                ]
            }
        )
        assert body["error"] == "invalid"
        assert body["fields"] == {
            "decisions.1.suspension": "A suspension's id (a UUID).",
            "decisions.1.decision.approved": "Send true or false.",
            "decisions.2": 'An object: {"suspension", "decision"}.',
            "decisions.3.decision": "A decision object, as resumeExecution takes it.",
            "decisions.4.note": "Unknown field.",
        }

    def test_invalid_json_is_refused(self) -> None:
        r = self.alice.post(URL, raw="{not json")
        assert r.status_code == 400 and r.json()["error"] == "invalid_json"


class RateLimitTestCase(BulkTestCase):
    def test_each_item_counts_as_one_decision(self, settings: Any) -> None:
        settings.RATE_LIMIT_DECISIONS = "3/minute"
        settings.RATE_LIMIT_USER_DECISIONS = "100/minute"
        made = [pending(self.users["operator"]) for _ in range(4)]
        assert self.alice.post(resume_url(made[0]), {"approved": True}).status_code == 202
        found = self.results([item(s, approved=True) for s in made[1:]])
        assert [x["status"] for x in found] == [202, 202, 429]
        assert found[2]["error"] == "rate_limited" and 1 <= found[2]["retry_after"] <= 60
        assert "This token" in found[2]["detail"]
        assert status_of(made[3]) == Suspension.Status.PENDING
        # The token's window is full: the single endpoint refuses it too, a refused list
        # whole as well; another token of the same user decides on.
        again = self.alice.post(resume_url(made[3]), {"approved": True})
        assert again.status_code == 429
        assert self.alice.post(URL, {"decisions": []}).status_code == 429
        assert self.results([item(made[3], approved=True)])[0]["status"] == 429
        other = self.api("reviewer")  # a second token of alice's
        r = other.post(URL, {"decisions": [item(made[3], approved=True)]})
        assert r.json()["results"][0]["status"] == 202


class SessionTestCase:
    def test_a_session_needs_the_csrf_token_as_the_single_endpoint_does(
        self, users: dict[str, Any]
    ) -> None:
        s = pending(users["operator"])
        browser = Client(enforce_csrf_checks=True)
        browser.force_login(users["reviewer"])
        assert browser.get("/").status_code == 200  # the inbox sets the CSRF cookie
        csrf = browser.cookies["csrftoken"].value
        body = {"decisions": [item(s, approved=True)]}
        r = browser.post(URL, body, content_type="application/json")
        assert r.status_code == 403 and r.json()["error"] == "csrf_failed"
        assert status_of(s) == Suspension.Status.PENDING
        r = browser.post(URL, body, content_type="application/json", headers={"X-CSRFToken": csrf})
        assert r.status_code == 200 and r.json()["results"][0]["status"] == 202
        s.refresh_from_db()
        assert s.decided_by == users["reviewer"]


def test_the_openapi_document_describes_it(api: Any) -> None:
    # The model the document shows is the one the view parses the body with.
    assert views.decide_many.openapi["POST"].body is bodies.Decisions
    doc = api("reviewer").get("/api/openapi.json").json()
    post = doc["paths"]["/api/decisions"]["post"]
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/Decisions"}
    schemas = doc["components"]["schemas"]
    listed = schemas["Decisions"]["properties"]["decisions"]
    assert (listed["minItems"], listed["maxItems"]) == (1, 100)
    assert schemas["Decide"]["properties"]["decision"]["$ref"] == "#/components/schemas/Resume"
    answer = post["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/DecisionResults"}
    assert {"id", "status", "suspension", "outcome", "votes", "error", "detail"} <= set(
        schemas["DecisionResult"]["properties"]
    )
    assert {"400", "401", "403", "413", "429"} <= set(post["responses"])
