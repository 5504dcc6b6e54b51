"""GET /api/suspensions (filters, oldest first, keyset pages) and GET /api/suspensions/{id}."""

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents.models import Suspension
from tests.approvals import state

# A well-formed id no row has, the same in every process: pytest-xdist's workers must
# collect the same test names.
UNKNOWN_ID = "6f1c2a1e-8d4b-4c3e-9a8f-2b7d5e0c1a93"


def walk(client: Any, path: str) -> tuple[list[str], int]:
    """Follow the `next` links from `path`; every id seen, and how many pages."""
    seen: list[str] = []
    pages = 0
    url: str | None = path
    while url:
        r = client.client.get(url, headers=client.headers)
        assert r.status_code == 200, r.content
        pages += 1
        seen += [s["id"] for s in r.json()["results"]]
        url = r.json()["next"]
    return seen, pages


class SuspensionListTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.users = users
        self.alice = api("reviewer")

    def test_it_lists_oldest_first_with_their_details(self) -> None:
        _, [old] = state.suspended(self.users["operator"])
        _, [new] = state.suspended(self.users["operator"], calls=[("ask_user", {"question": "Q?"})])
        Suspension.objects.filter(pk=new.pk).update(created_at=timezone.now() - timedelta(hours=2))
        r = self.alice.get("/api/suspensions")
        assert r.status_code == 200
        body = r.json()
        assert [s["id"] for s in body["results"]] == [str(new.pk), str(old.pk)]
        assert body["next"] is None
        item = body["results"][1]
        assert item["tool"] == "transfer_funds" and item["kind"] == "confirmation"
        assert item["input"] == state.TRANSFER and item["thread"] == str(old.thread_id)
        assert item["status"] == "pending" and item["decision"] is None
        assert item["expires_at"] and item["prompt"] == "I need a decision."

    def test_it_filters_by_status_agent_thread_tool_and_kind(self) -> None:
        t1, [transfer] = state.suspended(self.users["operator"])
        t2, [question] = state.suspended(
            self.users["operator"], agent_name="helpdesk", calls=[("ask_user", {"question": "Q?"})]
        )
        _, [done] = state.suspended(self.users["operator"])
        self.alice.post(state.resume_url(done), {"approved": False})

        def ids(**params: str) -> set[str]:
            r = self.alice.get("/api/suspensions", **params)
            assert r.status_code == 200, r.content
            return {s["id"] for s in r.json()["results"]}

        assert ids() == {str(transfer.pk), str(question.pk), str(done.pk)}
        assert ids(status="pending") == {str(transfer.pk), str(question.pk)}
        assert ids(status="rejected") == {str(done.pk)}
        assert ids(status="approved") == set()
        assert ids(agent="helpdesk") == {str(question.pk)}
        assert ids(thread=str(t1.pk)) == {str(transfer.pk)}
        assert ids(tool="transfer_funds") == {str(transfer.pk), str(done.pk)}
        assert ids(kind="input") == {str(question.pk)}
        assert ids(status="pending", agent="payer", tool="transfer_funds") == {str(transfer.pk)}
        assert ids(thread=str(uuid.uuid4())) == set()

    def test_it_filters_the_ignored_ones(self) -> None:
        _, [kept] = state.suspended(self.users["operator"])
        _, [dismissed] = state.suspended(self.users["operator"])
        assert self.alice.post(state.resume_url(dismissed), {"ignore": True}).status_code == 202

        def ids(**params: str) -> list[str]:
            r = self.alice.get("/api/suspensions", **params)
            assert r.status_code == 200, r.content
            return [s["id"] for s in r.json()["results"]]

        both = [str(kept.pk), str(dismissed.pk)]
        assert ids() == both
        assert ids(ignored="true") == ids(ignored="1") == [str(dismissed.pk)]
        assert ids(ignored="false") == ids(ignored="0") == [str(kept.pk)]
        assert ids(status="pending", ignored="true") == [str(dismissed.pk)]

    def test_next_links_walk_every_row_exactly_once(self) -> None:
        thread, _ = state.suspended(self.users["operator"])
        frame = thread.frames.get()
        base = timezone.now() - timedelta(days=1)
        rows = [
            Suspension(
                thread=thread,
                frame=frame,
                group=uuid.uuid4(),
                agent_name="payer",
                tool_use_id=f"toolu_{i}",
                tool_name="transfer_funds",
                tool_input={},
                kind="confirmation",
            )
            for i in range(119)
        ]
        Suspension.objects.bulk_create(rows)
        # Three rows share each instant, so a page boundary falls inside a tie that only the
        # id can break.
        for i, s in enumerate(Suspension.objects.order_by("id")):
            Suspension.objects.filter(pk=s.pk).update(created_at=base + timedelta(seconds=i // 3))
        expected = [
            str(pk)
            for pk in Suspension.objects.order_by("created_at", "id").values_list("pk", flat=True)
        ]
        assert len(expected) == 120

        seen, pages = walk(self.alice, "/api/suspensions?status=pending&limit=50")
        assert pages == 3
        assert seen == expected

        seen, pages = walk(self.alice, "/api/suspensions?limit=7&tool=transfer_funds")
        assert pages == 18 and seen == expected

        # A row decided while the reviewer pages is not shown twice or skipped past.
        first = self.alice.get("/api/suspensions", status="pending", limit="50").json()
        decided = first["results"][10]["id"]
        Suspension.objects.filter(pk=decided).update(status="approved")
        rest, _ = walk(self.alice, first["next"])
        assert rest == expected[50:]

    def test_the_default_page_is_fifty(self) -> None:
        thread, _ = state.suspended(self.users["operator"])
        frame = thread.frames.get()
        Suspension.objects.bulk_create(
            Suspension(
                thread=thread,
                frame=frame,
                group=uuid.uuid4(),
                tool_use_id=f"t{i}",
                tool_name="transfer_funds",
            )
            for i in range(59)
        )
        body = self.alice.get("/api/suspensions").json()
        assert len(body["results"]) == 50 and body["next"]
        assert (
            len(self.alice.client.get(body["next"], headers=self.alice.headers).json()["results"])
            == 10
        )

    @pytest.mark.parametrize(
        "params, field",
        [
            ({"status": "done"}, "status"),
            ({"status": "PENDING"}, "status"),
            ({"limit": "0"}, "limit"),
            ({"limit": "-1"}, "limit"),
            ({"limit": "201"}, "limit"),
            ({"limit": "ten"}, "limit"),
            ({"limit": "²"}, "limit"),
            ({"cursor": "garbage"}, "cursor"),
            ({"cursor": "!!!"}, "cursor"),
            ({"cursor": "bm90IGEgY3Vyc29y"}, "cursor"),  # "not a cursor"
            ({"cursor": "MjAyNi0wMS0wMXxub3QtYS11dWlk"}, "cursor"),  # a date, then not a UUID
            ({"thread": "not-a-uuid"}, "thread"),
            ({"ignored": "yes"}, "ignored"),
        ],
    )
    def test_it_refuses_bad_parameters(self, params: dict, field: str) -> None:
        r = self.alice.get("/api/suspensions", **params)
        assert r.status_code == 400, r.content
        assert r.json()["error"] == "invalid" and r.json()["detail"]
        assert field in r.json()["fields"]


class SuspensionDetailTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.alice = api("reviewer")
        self.thread, [self.s] = state.suspended(users["operator"])

    def test_it_shows_the_suspension_and_its_decision(self) -> None:
        r = self.alice.get(f"/api/suspensions/{self.s.pk}")
        assert r.status_code == 200
        assert r.json()["id"] == str(self.s.pk) and r.json()["decision"] is None
        self.alice.post(state.resume_url(self.s), {"approved": False, "reason": "no"})
        decision = self.alice.get(f"/api/suspensions/{self.s.pk}").json()["decision"]
        assert decision["status"] == "rejected" and decision["reason"] == "no"
        assert decision["decided_by"] == "alice" and decision["decided_at"]

    @pytest.mark.parametrize("suspension_id", [UNKNOWN_ID, "nope", "1"])
    def test_an_unknown_suspension_is_a_json_404(self, suspension_id: str) -> None:
        r = self.alice.get(f"/api/suspensions/{suspension_id}")
        assert r.status_code == 404 and r.json()["error"] == "not_found"
