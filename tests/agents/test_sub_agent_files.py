"""Agent files with sub-agents: who may be named, and the tools that come with them."""

from pathlib import Path
from typing import Any

import pytest

from agents.agentfiles import AgentFileError, load, parse
from agents.models import AgentDefinition


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


HOST = """
agents:
  - name: host
    script: [{text: hi}]
    sub_agents: [helper]
"""
HELPER = """
agents:
  - name: helper
    script: [{text: hi}]
"""


class SubAgentFilesTestCase:
    def test_a_sub_agent_may_be_defined_in_the_same_batch(self, db: Any, tmp_path: Path) -> None:
        load([write(tmp_path, "host.yaml", HOST), write(tmp_path, "helper.yaml", HELPER)])
        assert AgentDefinition.objects.get(name="host").sub_agents == ["helper"]

    def test_a_sub_agent_may_already_be_stored(self, db: Any, tmp_path: Path) -> None:
        load([write(tmp_path, "helper.yaml", HELPER)])
        load([write(tmp_path, "host.yaml", HOST)])
        assert AgentDefinition.objects.filter(name="host").exists()

    def test_an_unknown_sub_agent_is_refused_and_nothing_is_saved(
        self, db: Any, tmp_path: Path
    ) -> None:
        with pytest.raises(
            AgentFileError, match=r"agent 'host': unknown sub-agent\(s\) \['helper'\]"
        ):
            load([write(tmp_path, "host.yaml", HOST)])
        assert not AgentDefinition.objects.exists()

    def test_an_agent_cannot_be_its_own_sub_agent(self) -> None:
        text = (
            "agents:\n  - name: narcissus\n    script: [{text: hi}]\n    sub_agents: [narcissus]\n"
        )
        with pytest.raises(AgentFileError, match="cannot be its own sub-agent"):
            parse(text)

    @pytest.mark.parametrize("tool", ["use_skill", "use_agent", "complete"])
    def test_the_sub_agent_tools_are_not_listed_by_hand(self, tool: str) -> None:
        text = f"agents:\n  - name: a\n    script: [{{text: hi}}]\n    tools: [{tool}]\n"
        with pytest.raises(AgentFileError, match="offered automatically"):
            parse(text)

    def test_the_demo_file_loads(self, db: Any) -> None:
        loaded = load([Path(__file__).resolve().parents[2] / "demo" / "agents.yaml"])
        names = {agent.name for agent, _ in loaded}
        assert {"publisher", "writer", "research"} <= names
        publisher = AgentDefinition.objects.get(name="publisher")
        assert publisher.sub_agents == ["writer"]
