"""`manage.py load_agents`: agent files create or update agents, or are refused whole."""

import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from agents.models import AgentDefinition
from mcp_gateway.models import Upstream

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parent.parent.parent

OPS = """
agents:
  - name: ops
    description: Cleans up customer data
    model: scripted
    system_prompt: You are careful.
    tools: [displayConfirmation, delete_records]
    tool_overrides:
      delete_records: {execution_mode: blocking, timeout: 120, on_timeout: reject}
    max_iterations: 7
    script:
      - text: Let me check with you first.
        tool_calls:
          - {name: displayConfirmation, input: {action: Delete 500 records}}
      - tool_calls:
          - {name: delete_records, input: {table: orders, count: 500}}
      - text: Done.
"""


def write(tmp_path: Path, text: str, name: str = "agents.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def load(*paths: Path) -> str:
    out = io.StringIO()
    call_command("load_agents", *[str(p) for p in paths], stdout=out)
    return out.getvalue()


def refused(*paths: Path) -> str:
    with pytest.raises(CommandError) as raised:
        load(*paths)
    return str(raised.value)


def agent(name: str, **fields: str) -> str:
    """One agent of a file, with `fields` as extra YAML lines."""
    lines = [f"  - name: {name}", "    model: scripted", "    script: [{text: Hi.}]"]
    lines += [f"    {key}: {value}" for key, value in fields.items()]
    return "\n".join(lines) + "\n"


class LoadTestCase:
    def test_it_creates_an_agent_with_every_field_of_the_file(self, tmp_path: Path) -> None:
        out = load(write(tmp_path, OPS))

        assert out == "created agent ops\n"
        ops = AgentDefinition.objects.get(name="ops")
        assert ops.description == "Cleans up customer data"
        assert ops.model == "scripted"
        assert ops.system_prompt == "You are careful."
        assert ops.tools == ["displayConfirmation", "delete_records"]
        assert ops.tool_overrides == {
            "delete_records": {"execution_mode": "blocking", "timeout": 120, "on_timeout": "reject"}
        }
        assert ops.max_iterations == 7
        assert ops.script[0] == {
            "text": "Let me check with you first.",
            "tool_calls": [
                {"name": "displayConfirmation", "input": {"action": "Delete 500 records"}}
            ],
        }
        assert len(ops.script) == 3

    def test_loading_again_updates_the_agent_by_name(self, tmp_path: Path) -> None:
        path = write(tmp_path, OPS)
        load(path)
        first = AgentDefinition.objects.get(name="ops")
        path.write_text(
            OPS.replace("You are careful.", "You are very careful.").replace(
                "max_iterations: 7", ""
            )
        )

        out = load(path)

        assert out == "updated agent ops\n"
        [ops] = AgentDefinition.objects.all()
        assert ops.pk == first.pk
        assert ops.system_prompt == "You are very careful."
        assert ops.max_iterations == 10  # a field left out of the file goes back to its default

    def test_loading_the_same_file_again_says_nothing(self, tmp_path: Path) -> None:
        path = write(tmp_path, OPS + agent("greeter"))
        load(path)

        assert load(path) == ""
        path.write_text(OPS.replace("You are careful.", "You are very careful.") + agent("greeter"))
        assert load(path) == "updated agent ops\n"  # greeter is the same: not named

    def test_several_files_load_together(self, tmp_path: Path) -> None:
        one = write(tmp_path, OPS, "one.yaml")
        two = write(tmp_path, "agents:\n" + agent("greeter") + agent("helper"), "two.yaml")

        out = load(one, two)

        assert out.splitlines() == [
            "created agent ops",
            "created agent greeter",
            "created agent helper",
        ]
        assert sorted(AgentDefinition.objects.values_list("name", flat=True)) == [
            "greeter",
            "helper",
            "ops",
        ]

    def test_it_loads_the_demo_agents(self) -> None:
        out = load(ROOT / "demo" / "agents.yaml")

        # The agents the gateway runs; its MCP server, notes, is an upstream's definition.
        names = set(
            AgentDefinition.objects.exclude(model="external").values_list("name", flat=True)
        )
        assert {"ops", "finance", "helpdesk", "newsletter"} <= names
        assert out.count("created agent") == len(names)
        assert Upstream.objects.get(name="notes").url == "http://127.0.0.1:9301/mcp"
        finance = AgentDefinition.objects.get(name="finance")
        assert finance.tools == ["lookup_account", "transfer_funds"]
        assert finance.tool_overrides["transfer_funds"]["execution_mode"] == "blocking"
        ops = AgentDefinition.objects.get(name="ops")
        assert ops.script[0]["tool_calls"][0]["name"] == "displayConfirmation"
        assert ops.script[1]["tool_calls"][0]["name"] == "delete_records"
        helpdesk = AgentDefinition.objects.get(name="helpdesk")
        assert helpdesk.script[0]["tool_calls"][0]["name"] == "ask_user"
        newsletter = AgentDefinition.objects.get(name="newsletter")
        assert [c["name"] for c in newsletter.script[0]["tool_calls"]] == [
            "send_email",
            "send_email",
        ]

    def test_the_demo_agents_load_twice_without_change(self) -> None:
        demo = ROOT / "demo" / "agents.yaml"
        load(demo)
        before = list(AgentDefinition.objects.order_by("name").values("name", "tools", "script"))

        out = load(demo)

        assert "created" not in out
        assert (
            list(AgentDefinition.objects.order_by("name").values("name", "tools", "script"))
            == before
        )


class RefusedTestCase:
    def test_invalid_yaml_names_the_file_and_the_line(self, tmp_path: Path) -> None:
        path = write(tmp_path, "agents:\n  - name: ops\n    tools: [a, b\n")

        message = refused(path)

        assert message.startswith(f"{path}: not valid YAML")
        assert "line 4" in message

    def test_a_file_without_an_agents_list_is_refused(self, tmp_path: Path) -> None:
        path = write(tmp_path, "- name: ops\n")

        assert refused(path) == f"{path}: expected a mapping with an 'agents' list"

    def test_an_unknown_tool_names_the_agent_and_the_tool(self, tmp_path: Path) -> None:
        path = write(tmp_path, "agents:\n" + agent("ops", tools="[displayConfirmation, nuke]"))

        assert refused(path) == f"{path}: agent 'ops': 'tools' names unknown tool(s) ['nuke']"

    def test_an_override_of_a_tool_the_agent_does_not_have_is_refused(self, tmp_path: Path) -> None:
        path = write(
            tmp_path,
            "agents:\n"
            + agent(
                "ops",
                tools="[displayConfirmation]",
                tool_overrides="{delete_records: {execution_mode: blocking}}",
            ),
        )

        assert refused(path) == (
            f"{path}: agent 'ops': tool_overrides names 'delete_records', which is not in its tools"
        )

    def test_a_bad_on_timeout_names_the_override_and_the_choices(self, tmp_path: Path) -> None:
        path = write(
            tmp_path,
            "agents:\n"
            + agent(
                "finance",
                tools="[transfer_funds]",
                tool_overrides="{transfer_funds: {on_timeout: shrug}}",
            ),
        )

        assert refused(path) == (
            f"{path}: agent 'finance': tool_overrides.transfer_funds: on_timeout must be one of "
            "('reject', 'approve'), not 'shrug'"
        )

    @pytest.mark.parametrize(
        ("override", "problem"),
        [
            (
                "{execution_mode: later}",
                "execution_mode must be one of ('immediate', 'blocking'), not 'later'",
            ),
            ("{timeout: 0}", "timeout must be a positive whole number of seconds, not 0"),
            ("{timeout: '120'}", "timeout must be a positive whole number of seconds, not '120'"),
            ("{timeout: 1.5}", "timeout must be a positive whole number of seconds, not 1.5"),
            ("{timeout: yes}", "timeout must be a positive whole number of seconds, not True"),
            ("{description: 5}", "description must be text"),
            ("blocking", "overrides must be a mapping, like {timeout: 120}"),
            ("{colour: red}", "unknown override(s) ['colour']"),
        ],
    )
    def test_other_bad_overrides_are_refused(
        self, tmp_path: Path, override: str, problem: str
    ) -> None:
        path = write(
            tmp_path,
            "agents:\n"
            + agent(
                "finance",
                tools="[transfer_funds]",
                tool_overrides=f"{{transfer_funds: {override}}}",
            ),
        )

        assert refused(path) == f"{path}: agent 'finance': tool_overrides.transfer_funds: {problem}"

    def test_a_scripted_agent_needs_a_script(self, tmp_path: Path) -> None:
        path = write(tmp_path, "agents:\n  - name: quiet\n    model: scripted\n    tools: []\n")

        assert refused(path) == f"{path}: agent 'quiet': a scripted agent needs a 'script'"

    def test_an_agent_with_no_model_is_scripted_and_needs_a_script(self, tmp_path: Path) -> None:
        path = write(tmp_path, "agents:\n  - name: quiet\n")

        assert refused(path) == f"{path}: agent 'quiet': a scripted agent needs a 'script'"

    def test_a_claude_agent_needs_no_script(self, tmp_path: Path) -> None:
        path = write(tmp_path, "agents:\n  - name: thinker\n    model: claude-opus-4-6\n")

        load(path)

        assert AgentDefinition.objects.get(name="thinker").model == "claude-opus-4-6"

    def test_an_unknown_field_names_the_agent_and_the_field(self, tmp_path: Path) -> None:
        path = write(tmp_path, "agents:\n" + agent("ops", max_iteration="5"))

        message = refused(path)

        assert message.startswith(f"{path}: agent 'ops': unknown field(s) ['max_iteration']")
        assert "max_iterations" in message  # the fields it may have meant are listed

    def test_an_agent_without_a_name_is_named_by_its_position(self, tmp_path: Path) -> None:
        path = write(tmp_path, "agents:\n" + agent("ops") + "  - model: scripted\n")

        assert refused(path) == f"{path}: agents[1]: 'name' is required"

    @pytest.mark.parametrize(
        ("fields", "problem"),
        [
            ({"max_iterations": "0"}, "'max_iterations' must be a positive whole number"),
            ({"tools": "displayConfirmation"}, "'tools' must be a list of tool names"),
            ({"model": "[scripted]"}, "'model' must be a Claude model id or 'scripted'"),
        ],
    )
    def test_fields_of_the_wrong_kind_are_refused(
        self, tmp_path: Path, fields: dict[str, str], problem: str
    ) -> None:
        path = write(tmp_path, "agents:\n" + agent("ops", **fields))

        assert refused(path) == f"{path}: agent 'ops': {problem}"

    def test_a_script_turn_with_an_unknown_key_is_refused(self, tmp_path: Path) -> None:
        path = write(tmp_path, "agents:\n  - name: ops\n    script: [{say: Hi}]\n")

        assert refused(path) == (
            f"{path}: agent 'ops': script turn 1 may have only text, tool_calls, error and if_error"
        )

    def test_a_missing_file_is_refused_by_name(self, tmp_path: Path) -> None:
        missing = tmp_path / "nowhere.yaml"

        assert str(missing) in refused(missing)


class AllOrNothingTestCase:
    def test_one_bad_file_in_a_batch_saves_nothing(self, tmp_path: Path) -> None:
        good = write(tmp_path, OPS, "good.yaml")
        bad = write(tmp_path, "agents:\n" + agent("broken", tools="[nuke]"), "bad.yaml")

        message = refused(good, bad)

        assert message.startswith(f"{bad}: agent 'broken'")
        assert not AgentDefinition.objects.exists()

    def test_one_bad_agent_leaves_the_stored_agents_as_they_were(self, tmp_path: Path) -> None:
        load(write(tmp_path, OPS, "ops.yaml"))
        changed = write(
            tmp_path,
            OPS.replace("You are careful.", "Changed.") + agent("broken", on_timeout="approve"),
            "changed.yaml",
        )

        refused(changed)

        assert AgentDefinition.objects.get().system_prompt == "You are careful."
