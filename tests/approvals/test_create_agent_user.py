"""`manage.py create_agent_user USERNAME`: a user whose token (scope runs) starts runs and raises
requests, and who decides nothing (docs/mcp.md, "Point a client at it")."""

from io import StringIO
from typing import Any

from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from agents.models import Suspension


def command(name: str, *args: str) -> str:
    out = StringIO()
    call_command(name, *args, stdout=out)
    return out.getvalue().strip()


def client(token: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {token}"})


class CreateAgentUserTestCase:
    def test_its_token_raises_requests_it_may_not_decide(self, users: dict[str, Any]) -> None:
        said = command("create_agent_user", "claude-code-user")
        assert said.startswith("Created claude-code-user: it may start runs")
        token = command(
            "create_api_token", "claude-code-user", "--scope", "runs", "--name", "claude-code"
        )
        caller = client(token)

        raised = caller.post(
            "/api/requests",
            {
                "agent": "claude-code",
                "run_id": "run-1",
                "tool": "delete_note",
                "arguments": {"name": "welcome"},
                "idempotency_key": "delete-welcome",
            },
            content_type="application/json",
        )
        assert raised.status_code == 201, raised.json()
        request = raised.json()["id"]
        assert caller.get(f"/api/requests/{request}").status_code == 200
        # Not a reviewer: a token of every scope of its user's still decides nothing.
        every = command("create_api_token", "claude-code-user")
        s = Suspension.objects.get(pk=request)
        decided = client(every).post(
            f"/api/threads/{s.thread_id}/suspensions/{request}/resume",
            {"approved": True},
            content_type="application/json",
        )
        assert decided.status_code == 403
        assert not User.objects.get(username="claude-code-user").has_usable_password()

    def test_an_existing_user_keeps_its_password_and_joins_the_groups(
        self, users: dict[str, Any]
    ) -> None:
        said = command("create_agent_user", "mallory", "--group", "agents-prod")
        assert said.startswith("Updated mallory")
        mallory = User.objects.get(username="mallory")
        assert mallory.has_usable_password()
        assert mallory.has_perm("agents.add_thread")
        assert not mallory.has_perm("agents.decide_suspension")
        assert list(mallory.groups.values_list("name", flat=True)) == ["agents-prod"]
