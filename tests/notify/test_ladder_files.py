"""Ladders in agent files, tool overrides and the admin: written as durations, stored in
seconds, refused with a message that names the field when they cannot work."""

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from agents.agentfiles import AgentFileError, load, parse
from agents.models import AgentDefinition
from agents.runtime import ladder

AGENT = """
agents:
  - name: payer
    script: [{text: hi}]
    tools: [transfer_funds]
%s
"""


class DurationTestCase:
    @pytest.mark.parametrize(
        "value, seconds", [("90s", 90), ("10m", 600), ("2h", 7200), (45, 45), (" 5 m ", 300)]
    )
    def test_durations_read(self, value: Any, seconds: int) -> None:
        assert ladder.parse_duration(value) == seconds

    @pytest.mark.parametrize("value", ["10", "10x", "-5m", 0, True, None, "1.5m", "31d", 10**9])
    def test_bad_durations_are_refused(self, value: Any) -> None:
        with pytest.raises(ValueError):
            ladder.parse_duration(value)

    def test_a_ladder_is_sorted_earliest_first_and_steps_are_counted_from_one(self) -> None:
        steps = ladder.build_ladder(["2m", "10m"], "leads", 2)
        assert steps == ladder.Ladder((600, 120), "leads", 120)
        assert ladder.build_ladder("10m, 2m", "leads", "5m").escalate_before == 300
        assert ladder.build_ladder(["10m"], "leads", None).escalate_before == 600


class AgentFileTestCase:
    def test_the_fields_are_read_and_stored(self, db: Any, tmp_path: Any) -> None:
        Group.objects.create(name="leads")
        path = tmp_path / "a.yaml"
        path.write_text(
            AGENT % "    reminders: [10m, 2m]\n    escalate_to: leads\n    escalate_at: 2"
        )

        load([path])

        agent = AgentDefinition.objects.get(name="payer")
        assert agent.reminders == [600, 120]
        assert (agent.escalate_to, agent.escalate_at) == ("leads", "2")
        assert agent.ladder() == ladder.Ladder((600, 120), "leads", 120)

    @pytest.mark.parametrize(
        "lines, says",
        [
            ("    reminders: [10m, 10x]", "each reminder must be like 90s"),
            ("    reminders: {a: 10m}", "reminders must be a list"),
            ("    reminders: [2m, 120s]", "two reminders at the same time"),
            ("    reminders: [10m]\n    escalate_to: leads\n    escalate_at: 3", "has 1 reminder"),
            ("    escalate_to: leads", "escalate_to needs escalate_at"),
            ("    reminders: [10m]\n    escalate_at: 5m", "escalate_at needs escalate_to"),
            (
                "    tool_overrides:\n      transfer_funds: {reminders: [1x]}",
                "tool_overrides.transfer_funds: each reminder",
            ),
        ],
    )
    def test_a_ladder_that_cannot_work_is_refused(self, lines: str, says: str) -> None:
        with pytest.raises(AgentFileError, match=says):
            parse(AGENT % lines, "a.yaml")

    def test_the_escalation_group_must_exist(self, db: Any, tmp_path: Any) -> None:
        path = tmp_path / "a.yaml"
        path.write_text(
            AGENT
            % "    tool_overrides:\n      transfer_funds: {escalate_to: ghosts, escalate_at: 1m}"
        )
        with pytest.raises(AgentFileError, match="'ghosts', which does not exist"):
            load([path])
        assert not AgentDefinition.objects.exists()


class AdminTestCase:
    def test_the_admin_edits_the_ladder_as_durations(self, users: dict[str, Any]) -> None:
        Group.objects.create(name="leads")
        agent = AgentDefinition.objects.create(name="payer", script=[{"text": "hi"}])
        admin = Client()
        admin.force_login(users["admin"])
        url = f"/admin/agents/agentdefinition/{agent.pk}/change/"
        form = {
            "name": "payer",
            "model": "scripted",
            "tools": "[]",
            "sub_agents": "[]",
            "tool_overrides": "{}",
            "max_iterations": 10,
            "max_tokens": 4096,
            "script": '[{"text": "hi"}]',
            "agents_as_tools": "[]",
            "input_types": "[]",
            "on_input_timeout": "cancel",
        }

        refused = admin.post(url, {**form, "reminders": "10m, 2m", "escalate_to": "ghosts"})
        assert refused.status_code == 200 and b"No group is named" in refused.content
        refused = admin.post(url, {**form, "reminders": "10q"})
        assert b"each reminder must be like 90s" in refused.content

        saved = admin.post(
            url, {**form, "reminders": "2m, 10m", "escalate_to": "leads", "escalate_at": "2"}
        )
        assert saved.status_code == 302, saved.content
        agent.refresh_from_db()
        assert agent.reminders == [600, 120] and agent.escalate_at == "2"
        assert b'value="10m, 2m"' in admin.get(url).content
