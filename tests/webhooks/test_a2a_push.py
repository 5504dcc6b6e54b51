"""A2A push notifications through the real worker: a task's push config gets input-required
and then completed, with the config's Authorization header and token (A2A §4.3.3)."""

from typing import Any

import pytest
from django.db import transaction

from a2a_server.models import PushNotificationConfig
from agents import starting
from agents.models import AgentDefinition, Thread
from tests.conftest import wait_for

pytestmark = pytest.mark.worker

AGENTS = """
agents:
  - name: clerk
    model: scripted
    description: Asks which form.
    script:
      - text: "Which form: A or B?"
      - tool_calls:
          - {name: complete, input: {result: Filed.}}
  - name: desk
    model: scripted
    sub_agents: [clerk]
    script:
      - tool_calls:
          - {name: use_agent, input: {name: clerk, message: file}}
      - text: All done.
"""


class A2APushTestCase:
    def test_a_task_s_push_config_gets_input_required_then_completed(
        self, worker: Any, api: Any, users: Any, load_agents: Any, receiver: Any
    ) -> None:
        load_agents(AGENTS)
        r = receiver()
        # The run and its push config commit together, as an A2A message/send with a
        # taskPushNotificationConfig makes them.
        with transaction.atomic():
            thread = starting.start_thread(
                AgentDefinition.objects.get(name="desk"), "file it", users["admin"]
            )
            PushNotificationConfig.objects.create(
                thread=thread,
                config_id="client-1",
                url=r.url,
                token="tok-for-this-task",
                authentication={"scheme": "Bearer", "credentials": "client-credentials"},
            )
        states = lambda: [g.json["statusUpdate"]["status"]["state"] for g in r.requests]  # noqa: E731 - read again at each poll
        wait_for(lambda: "TASK_STATE_INPUT_REQUIRED" in states(), timeout=20, what="input-required")
        asked = r.requests[states().index("TASK_STATE_INPUT_REQUIRED")].json["statusUpdate"]
        assert asked["taskId"] == str(thread.pk)
        assert asked["status"]["message"]["parts"][0]["text"] == "Which form: A or B?"
        assert asked["status"]["message"]["metadata"] == {"awaiting": "input"}
        reply = api("admin").post(f"/api/threads/{thread.pk}/messages", {"text": "A"})
        assert reply.status_code == 202, reply.content
        wait_for(lambda: "TASK_STATE_COMPLETED" in states(), timeout=20, what="completed")
        assert Thread.objects.get(pk=thread.pk).status == "completed"
        assert states() == ["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"]
        done = r.requests[-1].json["statusUpdate"]
        assert done["taskId"] == str(thread.pk)
        assert done["metadata"]["eventType"] == "THREAD_COMPLETED"
        # The answer is the task's artifact (GetTask); the push says the task ended.
        assert "message" not in done["status"]
        for g in r.requests:
            assert g.headers["authorization"] == "Bearer client-credentials"
            assert g.headers["x-a2a-notification-token"] == "tok-for-this-task"
            assert g.headers["content-type"] == "application/a2a+json"
