"""Policy in agent files and the admin (agents.policy): checked when loaded, with messages that
name the agent and the key; the tool's own default in the registry; the layers in force."""

from typing import Any

import pytest
from django.contrib.auth.models import Group

from agents import policy, rules
from agents.agentfiles import AgentFileError, load, parse
from agents.models import AgentDefinition
from agents.runtime.tools import BLOCKING, Tool, ToolRegistry

AGENT = """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds]
    policy: {policy}
    script:
      - text: ok
"""


def parsed(text: str) -> dict[str, Any]:
    return parse(AGENT.replace("{policy}", text))[0]["policy"]


def refused(text: str) -> str:
    with pytest.raises(AgentFileError) as e:
        parsed(text)
    return str(e.value)


class AgentFilePolicyTestCase:
    def test_it_keeps_a_valid_policy(self) -> None:
        found = parsed(
            '{groups: [finance], four_eyes: true, quorum: 2, auto_approve: [{arg: amount, op: "<",'
            " value: 100}], auto_reject: [{all: [{arg: payee.country, op: in, value: [KP, IR]},"
            ' {arg: amount, op: ">", value: 0}]}], tools: {transfer_funds: {quorum: 3}}}'
        )
        assert found["quorum"] == 2 and found["tools"] == {"transfer_funds": {"quorum": 3}}
        assert found["auto_reject"][0]["all"][0]["arg"] == "payee.country"

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("{quorum: 0}", "agent 'payer': policy.quorum: a whole number from 1 to 20"),
            ("{quorum: yes}", "policy.quorum: a whole number from 1 to 20"),
            ("{four_eyes: maybe}", "policy.four_eyes: true or false"),
            ("{approvers: 2}", "policy: unknown key(s) ['approvers']"),
            ("{groups: [1]}", "policy.groups: a list of group names"),
            (
                '{auto_approve: [{arg: amount, op: "=<", value: 1}]}',
                "policy.auto_approve[0]: 'op' must be one of ==, !=, <, <=, >, >=, in, not in",
            ),
            (
                '{auto_approve: [{arg: amount, op: "<", value: "100"}]}',
                "policy.auto_approve[0]: < compares numbers; 'value' must be a number",
            ),
            (
                "{auto_reject: [{arg: currency, op: in, value: EUR}]}",
                "policy.auto_reject[0]: in needs a list of plain values as 'value'",
            ),
            (
                "{auto_reject: [{arg: amount, op: '>', value: 1, when: x}]}",
                "policy.auto_reject[0]: a condition is {arg: name, op: '<', value: 100}",
            ),
            (
                "{auto_reject: [{all: []}]}",
                "policy.auto_reject[0]: 'all' is a non-empty list of conditions",
            ),
            (
                "{tools: {send_email: {quorum: 2}}}",
                "policy.tools: names 'send_email', which is not in its tools",
            ),
            ("{tools: {transfer_funds: {quorum: -1}}}", "policy.tools.transfer_funds.quorum"),
        ],
    )
    def test_it_refuses_a_policy_it_cannot_use(self, text: str, message: str) -> None:
        assert message in refused(text)

    def test_its_groups_must_exist(self, db: Any, tmp_path: Any) -> None:
        path = tmp_path / "a.yaml"
        path.write_text(AGENT.replace("{policy}", "{groups: [treasury]}"))
        with pytest.raises(AgentFileError) as e:
            load([path])
        assert "policy names the group 'treasury', which does not exist" in str(e.value)
        assert not AgentDefinition.objects.exists()
        Group.objects.create(name="treasury")
        [(agent, _)] = load([path])
        assert agent.policy == {"groups": ["treasury"]}


class LayersTestCase:
    def test_the_agent_overrides_the_tool_key_by_key(self) -> None:
        tool = Tool(
            name="pay",
            description="",
            input_schema={"type": "object"},
            execution_mode=BLOCKING,
            policy={"quorum": 2, "groups": ["finance"]},
        )
        assert policy.effective({}, tool) == {**policy.DEFAULTS, "quorum": 2, "groups": ["finance"]}
        agent = {"four_eyes": False, "groups": ["ops"], "tools": {"pay": {"quorum": 3}}}
        assert policy.effective(agent, tool) == {
            **policy.DEFAULTS,
            "four_eyes": False,
            "groups": ["ops"],
            "quorum": 3,
        }

    def test_four_eyes_is_on_unless_a_policy_says_otherwise(self) -> None:
        tools = ToolRegistry()
        tool = tools.register(Tool(name="pay", description="", input_schema={"type": "object"}))
        assert policy.effective(None, tool)["four_eyes"] is True
        from agents.runtime.tools import registry

        # A question goes to whoever started the run: ask_user says so itself.
        assert policy.effective(None, registry.get("ask_user"))["four_eyes"] is False

    def test_a_tool_with_a_broken_policy_is_refused(self) -> None:
        with pytest.raises(ValueError, match="pay: policy.quorum"):
            Tool(name="pay", description="", input_schema={"type": "object"}, policy={"quorum": 0})


class RulesTestCase:
    @pytest.mark.parametrize(
        ("rule", "args", "holds"),
        [
            ({"arg": "amount", "op": "<", "value": 100}, {"amount": 99.5}, True),
            ({"arg": "amount", "op": "<", "value": 100}, {"amount": 100}, False),
            ({"arg": "amount", "op": "<", "value": 100}, {"amount": "5"}, False),
            ({"arg": "amount", "op": "<", "value": 100}, {"amount": True}, False),
            ({"arg": "amount", "op": "<", "value": 100}, {}, False),
            ({"arg": "amount", "op": "!=", "value": 1}, {}, False),
            ({"arg": "flag", "op": "==", "value": 1}, {"flag": True}, False),
            ({"arg": "a.b", "op": "==", "value": "x"}, {"a": {"b": "x"}}, True),
            ({"arg": "a.b", "op": "==", "value": "x"}, {"a": "x"}, False),
            ({"arg": "c", "op": "in", "value": ["EUR", "USD"]}, {"c": "EUR"}, True),
            ({"arg": "c", "op": "not in", "value": ["EUR", "USD"]}, {"c": "GBP"}, True),
            ({"arg": "c", "op": "not in", "value": ["EUR"]}, {"c": ["EUR"]}, False),
            (
                {
                    "all": [
                        {"arg": "a", "op": ">", "value": 1},
                        {"arg": "b", "op": "==", "value": 2},
                    ]
                },
                {"a": 2, "b": 3},
                False,
            ),
        ],
    )
    def test_a_rule_holds_only_on_what_it_names(
        self, rule: dict[str, Any], args: dict[str, Any], holds: bool
    ) -> None:
        assert rules.matches(rule, args) is holds

    def test_auto_reject_is_read_before_auto_approve(self) -> None:
        rules = {
            "auto_approve": [{"arg": "amount", "op": "<", "value": 100}],
            "auto_reject": [{"arg": "to", "op": "==", "value": "blocked"}],
        }
        found = policy.automatic(rules, {"amount": 5, "to": "blocked"})
        assert found is not None and found.approved is False and found.text == 'to == "blocked"'
        assert policy.automatic(rules, {"amount": 5, "to": "ok"}).approved is True
        assert policy.automatic(rules, {"amount": 500, "to": "ok"}) is None


class AdminPolicyTestCase:
    def test_the_admin_checks_the_policy(self, users: dict[str, Any], client: Any) -> None:
        from agents.admin import AgentDefinitionForm

        base = {
            "name": "payer",
            "model": "scripted",
            "tools": '["transfer_funds"]',
            "sub_agents": "[]",
            "tool_overrides": "{}",
            "max_iterations": 10,
            "max_tokens": 4096,
            "script": "[]",
            "agents_as_tools": "[]",
            "input_types": "[]",
            "on_input_timeout": "cancel",
        }
        form = AgentDefinitionForm(data={**base, "policy": '{"quorum": 0}'})
        assert not form.is_valid()
        assert "policy.quorum: a whole number from 1 to 20" in str(form.errors["policy"])
        form = AgentDefinitionForm(data={**base, "policy": '{"groups": ["nobody"]}'})
        assert not form.is_valid()
        assert "No group is named nobody." in str(form.errors["policy"])
        form = AgentDefinitionForm(data={**base, "policy": '{"quorum": 2}'})
        assert "policy" not in form.errors, form.errors
