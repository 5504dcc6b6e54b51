"""Approvals over A2A: a waiting approval is in the task's status; a data part decides it
through the same action and checks as the REST API; A2A and REST at once, one wins."""

import asyncio
import threading
from typing import Any

import pytest
from a2a.types import InvalidParamsError, TaskState, UnsupportedOperationError

from agents import receipt_keys, receipts
from agents.hashing import canonical_hash
from agents.models import Event, Suspension
from demo.models import DemoAction
from tests.a2a.conftest import Gateway, data_of, message, run, sent

pytestmark = [pytest.mark.worker]

INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = TaskState.TASK_STATE_COMPLETED


def decide(gateway: Gateway, task_id: str, who: str = "reviewer", **decision: Any) -> Any:
    """SendMessage with a decision part; the task, or the error the client raised."""

    async def call() -> Any:
        async with gateway.client(who) as client:
            try:
                return await sent(client, message(data={"decision": decision}, task_id=task_id))
            except Exception as e:  # the client raises the JSON-RPC error as an A2A error
                return e

    return run(call())


def start(gateway: Gateway, agent: str = "payer") -> Any:
    """A task started by the operator: the reviewers who decide it did not start it."""

    async def call() -> Any:
        async with gateway.client("operator") as client:
            return await sent(client, message("go", agent=agent))

    return run(call())


def first_of_two(task_id: str) -> Suspension:
    """The first of the mailer's two suspensions: the task waits on the other meanwhile."""
    first, second = Suspension.objects.filter(thread_id=task_id).order_by("created_at", "id")
    return first


def race(gateway: Gateway, task_id: str, suspension: str) -> dict[str, Any]:
    """Approve over A2A (alice) and reject over REST (bob) at the same moment."""
    barrier = threading.Barrier(2)
    found: dict[str, Any] = {}

    def over_a2a() -> None:
        async def call() -> Any:
            async with gateway.client() as client:
                msg = message(
                    data={"decision": {"suspension": suspension, "approved": True}},
                    task_id=task_id,
                )
                barrier.wait()
                try:
                    return await sent(client, msg, return_immediately=True)
                except UnsupportedOperationError as e:
                    return e

        found["a2a"] = asyncio.run(call())

    def over_rest() -> None:
        with gateway.rest("teammate") as rest:
            barrier.wait()
            found["rest"] = rest.post(
                f"/api/threads/{task_id}/suspensions/{suspension}/resume",
                json={"approved": False, "reason": "no"},
            )

    threads = [threading.Thread(target=over_a2a), threading.Thread(target=over_rest)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return found


class DecisionsTestCase:
    def test_an_approval_is_in_the_status_and_a_decision_part_resumes_the_task(
        self, gateway: Gateway, users: dict[str, Any]
    ) -> None:
        task = start(gateway)

        assert task.status.state == INPUT_REQUIRED
        assert task.status.message.metadata["awaiting"] == "approval"
        text, data = task.status.message.parts
        assert text.text == "payer waits for approval to call transfer_funds."
        [waits] = data_of(data)["suspensions"]
        s = Suspension.objects.get(thread_id=task.id)
        assert waits == {
            "suspension": str(s.pk),
            "kind": "confirmation",
            "agent": "payer",
            "tool": "transfer_funds",
            "arguments": {
                "from_account": "ACC-1",
                "to_account": "ACC-2",
                "amount": 200,
                "currency": "EUR",
            },
            "prompt": "Invoice 118 is due; I will pay it.",
            "expiresAt": s.expires_at.isoformat(),
            "onTimeout": "reject",
        }

        edited = {"from_account": "ACC-1", "to_account": "ACC-2", "amount": 150, "currency": "EUR"}
        done = decide(
            gateway,
            task.id,
            suspension=str(s.pk),
            approved=True,
            reason="half now",
            modifiedArgs=edited,
        )

        assert done.status.state == COMPLETED
        assert done.artifacts[0].parts[0].text == "Paid."
        s.refresh_from_db()
        assert (s.status, s.reason, s.decided_by) == ("approved", "half now", users["reviewer"])
        assert s.modified_args == edited and isinstance(s.modified_args["amount"], int)
        assert DemoAction.objects.get(tool="transfer_funds").arguments["amount"] == 150
        [decided] = Event.objects.filter(thread_id=task.id, type=Event.Type.SUSPENSION_DECIDED)
        assert decided.actor == users["reviewer"]
        # In the history, as the person sent it.
        assert {"decision": {**data_of(done.history[2].parts[0])["decision"]}} == {
            "decision": {
                "suspension": str(s.pk),
                "approved": True,
                "reason": "half now",
                "modifiedArgs": edited,
                # Its signed receipt (agents.receipts), checked with the published keys alone.
                "receipt": s.receipt,
            }
        }
        claims = receipts.verify(s.receipt, receipt_keys.jwks())
        assert claims["decider"]["name"] == "alice" and claims["args_hash"] == canonical_hash(
            edited
        )

        # The same decision again is harmless; a different one learns what was decided.
        again = decide(
            gateway,
            task.id,
            suspension=str(s.pk),
            approved=True,
            reason="half now",
            modifiedArgs=edited,
        )
        assert again.status.state == COMPLETED
        other = decide(gateway, task.id, "teammate", suspension=str(s.pk), approved=False)
        assert isinstance(other, UnsupportedOperationError)
        assert str(other) == "alice already decided: approved."
        assert other.data["status"] == "approved"
        assert Event.objects.filter(thread_id=task.id, type="SUSPENSION_DECIDED").count() == 1

    def test_a_different_decision_after_another_gets_the_recorded_outcome(
        self, gateway: Gateway
    ) -> None:
        task = start(gateway, "mailer")
        s = first_of_two(task.id)
        with gateway.rest("teammate") as rest:
            r = rest.post(
                f"/api/threads/{task.id}/suspensions/{s.pk}/resume",
                json={"approved": False, "reason": "not this month"},
            )
        assert r.status_code == 202

        refused = decide(gateway, task.id, suspension=str(s.pk), approved=True)

        assert isinstance(refused, UnsupportedOperationError)
        assert str(refused) == "bob already decided: rejected."
        assert refused.data["status"] == "rejected"
        assert refused.data["decidedBy"] == "bob"
        assert refused.data["reason"] == "not this month"
        assert Event.objects.filter(thread_id=task.id, type="SUSPENSION_DECIDED").count() == 1
        # The task still waits for the other email; its status now lists that one alone.
        got = gateway.rpc("GetTask", {"id": task.id}).json()["result"]["status"]
        assert got["state"] == "TASK_STATE_INPUT_REQUIRED"
        [left] = got["message"]["parts"][1]["data"]["suspensions"]
        assert left["arguments"]["to"] == "b@example.com"

    def test_a2a_and_rest_deciding_at_once_one_wins_and_the_other_learns_the_outcome(
        self, gateway: Gateway
    ) -> None:
        for _ in range(3):
            # The other suspension keeps the task waiting whoever wins: the loser's answer
            # is about the race, not about a task that has ended meanwhile.
            task = start(gateway, "mailer")
            s = first_of_two(task.id)

            found = race(gateway, task.id, str(s.pk))

            s.refresh_from_db()
            a2a_won = not isinstance(found["a2a"], Exception)
            rest_won = found["rest"].status_code == 202
            assert a2a_won != rest_won, (found, s.status)
            if a2a_won:
                assert s.status == "approved"
                assert found["rest"].status_code == 409
                assert found["rest"].json()["outcome"]["status"] == "approved"
            else:
                assert s.status == "rejected"
                assert found["a2a"].data["status"] == "rejected"
                assert found["a2a"].data["decidedBy"] == "bob"
            decided = Event.objects.filter(thread_id=task.id, type="SUSPENSION_DECIDED")
            assert decided.count() == 1

    def test_edited_arguments_that_break_the_tool_schema_change_nothing(
        self, gateway: Gateway
    ) -> None:
        task = start(gateway)
        s = Suspension.objects.get(thread_id=task.id)
        events = Event.objects.count()

        refused = decide(
            gateway,
            task.id,
            suspension=str(s.pk),
            approved=True,
            modifiedArgs={"from_account": "ACC-1", "to_account": "ACC-2", "amount": "lots"},
        )

        assert isinstance(refused, InvalidParamsError)
        raw = gateway.rpc(
            "SendMessage",
            {
                "message": {
                    "messageId": "m",
                    "role": "ROLE_USER",
                    "taskId": task.id,
                    "parts": [
                        {
                            "data": {
                                "decision": {
                                    "suspension": str(s.pk),
                                    "approved": True,
                                    "modifiedArgs": {"amount": "lots"},
                                }
                            }
                        }
                    ],
                }
            },
        ).json()["error"]
        assert raw["code"] == -32602
        violations = [d for d in raw["data"] if d["@type"].endswith("BadRequest")]
        fields = {v["field"] for v in violations[0]["fieldViolations"]}
        assert any(f.startswith("message.parts[0].data.decision.modifiedArgs") for f in fields)
        s.refresh_from_db()
        assert s.status == "pending"
        assert Event.objects.count() == events
        unknown = decide(gateway, task.id, suspension=str(task.id), approved=True)
        assert isinstance(unknown, InvalidParamsError)
        assert Event.objects.count() == events
