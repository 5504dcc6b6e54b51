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


# Numbers JSON has no room for: Python reads NaN and ±Infinity (and 1e400, as Infinity); SQLite
# would keep them and PostgreSQL's jsonb would turn them into null, so every body refuses them
# as it refuses any text that is not JSON.
NOT_FINITE = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"]


def assert_not_json(r: Any, number: str) -> None:
    assert r.status_code == 400, r.content
    data = r.json()
    assert data["error"] == "invalid_json", data
    assert data["detail"].startswith("The body is not valid JSON: ") and number in data["detail"]


class NotFiniteNumbersTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], api: Any) -> None:
        self.users = users
        self.alice = api("reviewer")
        state.agent("payer")

    @pytest.mark.parametrize("number", NOT_FINITE)
    def test_a_run_does_not_start(self, number: str) -> None:
        for raw in (
            '{"agent": "payer", "message": ' + number + "}",
            '{"agent": "payer", "message": "go", "extra": [' + number + "]}",
        ):
            assert_not_json(self.alice.post("/api/threads", raw=raw), number)
        assert not Thread.objects.exists() and not Event.objects.exists()

    @pytest.mark.parametrize("number", NOT_FINITE)
    def test_a_decision_is_not_taken(self, number: str) -> None:
        _, [s] = state.suspended(self.users["operator"], calls=EMAIL)
        for raw in (
            '{"approved": ' + number + "}",
            '{"approved": true, "modifiedArgs": {"to": "a@b.c", "subject": ' + number + "}}",
            '{"approved": false, "seen": {"agent_version": ' + number + "}}",
        ):
            assert_not_json(self.alice.post(resume_url(s), raw=raw), number)
        s.refresh_from_db()
        assert s.status == Suspension.Status.PENDING and s.decided_by is None

    @pytest.mark.parametrize("number", NOT_FINITE)
    def test_an_outside_request_is_not_raised(self, api: Any, number: str) -> None:
        raw = (
            '{"agent": "billing-bot", "run_id": "run-1", "idempotency_key": "k-1", '
            '"tool": "pay", "arguments": {"amount": ' + number + "}}"
        )
        assert_not_json(api("operator").post("/api/requests", raw=raw), number)
        assert not Suspension.objects.exists() and not Thread.objects.exists()

    @pytest.mark.parametrize("number", NOT_FINITE)
    def test_a_reply_and_an_extension_are_refused(self, number: str) -> None:
        waiting = state.thread(self.users["reviewer"], status=Thread.Status.WAITING_INPUT)
        r = self.alice.post(
            f"/api/threads/{waiting.pk}/messages", raw='{"data": {"n": ' + number + "}}"
        )
        assert_not_json(r, number)
        _, [s] = state.suspended(self.users["operator"])
        extend = f"/api/threads/{s.thread_id}/suspensions/{s.pk}/extend"
        r = self.alice.post(extend, raw='{"seconds": ' + number + ', "reason": "x"}')
        assert_not_json(r, number)
        waiting.refresh_from_db()
        s.refresh_from_db()
        assert waiting.status == Thread.Status.WAITING_INPUT and s.extended_at is None

    def test_finite_numbers_still_pass(self) -> None:
        _, [s] = state.suspended(self.users["operator"])
        edited = '{"from_account": "A-1", "to_account": "B-2", "amount": 1.5e2}'
        r = self.alice.post(resume_url(s), raw='{"approved": true, "modifiedArgs": ' + edited + "}")
        assert r.status_code == 202, r.content
        s.refresh_from_db()
        assert s.modified_args["amount"] == 150
