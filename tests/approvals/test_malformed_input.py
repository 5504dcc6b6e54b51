"""Bodies json.loads accepts (or chokes on) that the database cannot store: a 400, never a 500."""

from typing import Any

import pytest

from agents.models import Event, Suspension, Thread
from tests.approvals import state
from tests.approvals.state import resume_url

EMAIL = [("send_email", {"to": "ops@example.com", "subject": "Hi"})]

DEEP = "[" * 10_000 + "]" * 10_000
# Deeper than the API allows, yet shallow enough for json.loads to parse.
NESTED_40 = "[" * 40 + "]" * 40


BAD_VALUES = [
    DEEP,
    NESTED_40,
    '"\\ud800 alone"',
    '"ends in a low half \\udfff"',
    '"a \\u0000 inside"',
    '{"inner": ["\\u0000"]}',
]


def bodies(fields: dict[str, str], inside: str = "{}") -> list[tuple[str, str]]:
    """Malformed variants of a valid body whose fields are `fields` (JSON text each), with the
    field each one should be refused for. The first field's value becomes each bad value, put
    where `inside` has {} (so a bad value can sit within an otherwise valid object)."""
    first = next(iter(fields))

    def body(**replaced: str) -> str:
        merged = {**fields, **replaced}
        # Keys are written as given, so a key can carry a JSON escape of its own.
        return "{" + ", ".join(f'"{k}": {v}' for k, v in merged.items()) + "}"

    return [
        *((body(**{first: inside.replace("{}", bad)}), first) for bad in BAD_VALUES),
        (body(**{"bad\\u0000key": '"x"'}), "bad\ufffdkey"),
        (body(**{"\\udc00": '"x"'}), "\ufffd"),
    ]


def assert_refused(r: Any, field: str) -> None:
    assert r.status_code == 400, r.content
    data = r.json()
    assert set(data) >= {"error", "detail"} and data["detail"], data
    assert data["error"] in ("invalid", "invalid_json"), data
    if data["error"] == "invalid" or "fields" in data:
        assert field in data["fields"] or any(k.startswith(field) for k in data["fields"]), data


class StartThreadMalformedTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.alice = api("reviewer")
        state.agent("payer")

    @pytest.mark.parametrize(
        "raw, field", bodies({"message": '"go"', "agent": '"payer"'}), ids=lambda v: v[:20]
    )
    def test_it_refuses_a_body_the_database_cannot_store(self, raw: str, field: str) -> None:
        r = self.alice.post("/api/threads", raw=raw)
        assert_refused(r, field)
        assert not Thread.objects.exists() and not Event.objects.exists()

    def test_it_refuses_deep_nesting_with_the_json_error(self) -> None:
        r = self.alice.post("/api/threads", raw='{"agent": "payer", "message": ' + DEEP + "}")
        assert r.status_code == 400
        assert r.json()["error"] == "invalid_json" and "nested" in r.json()["detail"]

    def test_it_takes_a_surrogate_pair(self) -> None:
        raw = '{"agent": "payer", "message": "ok \\ud83d\\ude00"}'
        r = self.alice.post("/api/threads", raw=raw)
        assert r.status_code == 201, r.content
        assert Thread.objects.get().title == "ok \U0001f600"


class ThreadMessageMalformedTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.alice = api("reviewer")
        self.thread = state.thread(users["reviewer"], status=Thread.Status.WAITING_INPUT)

    @pytest.mark.parametrize("raw, field", bodies({"text": '"hello"'}), ids=lambda v: v[:20])
    def test_it_refuses_a_body_the_database_cannot_store(self, raw: str, field: str) -> None:
        before = Event.objects.count()
        r = self.alice.post(f"/api/threads/{self.thread.pk}/messages", raw=raw)
        assert_refused(r, field)
        self.thread.refresh_from_db()
        assert self.thread.status == Thread.Status.WAITING_INPUT
        assert Event.objects.count() == before


class ResumeMalformedTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.alice = api("reviewer")
        self.users = users

    def assert_still_pending(self, s: Suspension) -> None:
        s.refresh_from_db()
        assert s.status == Suspension.Status.PENDING and s.decided_by is None

    @pytest.mark.parametrize(
        "raw, field", bodies({"reason": '"no"', "approved": "false"}), ids=lambda v: v[:20]
    )
    def test_it_refuses_a_decision_the_database_cannot_store(self, raw: str, field: str) -> None:
        _, [s] = state.suspended(self.users["operator"])
        assert_refused(self.alice.post(resume_url(s), raw=raw), field)
        self.assert_still_pending(s)

    @pytest.mark.parametrize(
        "raw, field",
        bodies(
            {"modifiedArgs": '{"to": "a@b.c", "subject": "Hi"}', "approved": "true"},
            inside='{"to": "a@b.c", "subject": {}}',
        ),
        ids=lambda v: v[:20],
    )
    def test_it_refuses_edited_arguments_the_database_cannot_store(
        self, raw: str, field: str
    ) -> None:
        _, [s] = state.suspended(self.users["operator"], calls=EMAIL)
        assert_refused(self.alice.post(resume_url(s), raw=raw), field)
        self.assert_still_pending(s)

    def test_it_refuses_nul_deep_inside_edited_arguments_by_path(self) -> None:
        _, [s] = state.suspended(self.users["operator"], calls=EMAIL)
        raw = '{"approved": true, "modifiedArgs": {"to": "a@b.c", "subject": "x\\u0000y"}}'
        r = self.alice.post(resume_url(s), raw=raw)
        assert r.status_code == 400
        assert "modifiedArgs.subject" in r.json()["fields"]
        self.assert_still_pending(s)

    @pytest.mark.parametrize(
        "raw",
        ['{"response": "\\ud800"}', '{"response": "a\\u0000b"}', '{"response": ' + DEEP + "}"],
    )
    def test_it_refuses_an_answer_the_database_cannot_store(self, raw: str) -> None:
        _, [s] = state.suspended(
            self.users["operator"], calls=[("ask_user", {"question": "Which colour?"})]
        )
        assert_refused(self.alice.post(resume_url(s), raw=raw), "response")
        self.assert_still_pending(s)
