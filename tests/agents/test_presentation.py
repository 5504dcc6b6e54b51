"""How a card explains a call: summary templates filled from the arguments as text, checked
where they are declared (the registry, an agent file's tool_overrides), and kept with the
suspension the engine raises."""

from typing import Any

import pytest

from agents import presentation
from agents.agentfiles import AgentFileError, parse
from agents.runtime.tools import BLOCKING, Tool, registry

SCHEMA = {
    "type": "object",
    "properties": {
        "amount": {"type": "number"},
        "currency": {"type": "string"},
        "payee": {"type": "object"},
        "urgent": {"type": "boolean"},
    },
}


class FillTestCase:
    def test_placeholders_take_the_arguments_as_text(self) -> None:
        template = "Pay {amount} {currency} to {payee.name} ({payee.country}), urgent: {urgent}"
        args = {"amount": 12.5, "currency": "EUR", "payee": {"name": "Ada"}, "urgent": True}
        assert presentation.fill(template, args) == "Pay 12.5 EUR to Ada (), urgent: yes"

    def test_a_missing_argument_leaves_no_gap(self) -> None:
        assert presentation.fill("Pay {amount} {currency} now", {"amount": 3}) == "Pay 3 now"

    def test_nothing_is_evaluated(self) -> None:
        # str.format would reach attributes; the template only ever names arguments.
        args = {"amount": "{currency}", "currency": "EUR"}
        assert presentation.fill("{amount.__class__} {amount}", args) == "{currency}"
        assert presentation.fill("{0} {amount!r} {amount:>9}", args) == "{0} {amount!r} {amount:>9}"

    def test_markup_stays_text_and_long_values_are_cut(self) -> None:
        text = presentation.fill("{currency}", {"currency": "<b>x</b>\n" + "y" * 300})
        assert text.startswith("<b>x</b> y") and text.endswith("…")
        assert len(text) == presentation.MAX_VALUE

    def test_objects_are_written_as_json(self) -> None:
        assert presentation.fill("{payee}", {"payee": {"a": [1, 2]}}) == '{"a": [1, 2]}'


class DeclareTestCase:
    def test_a_summary_may_name_only_the_tool_s_arguments(self) -> None:
        with pytest.raises(ValueError, match=r"summary names \['amont'\]"):
            Tool("pay", "Pay.", SCHEMA, summary="Pay {amont}")
        Tool("pay", "Pay.", SCHEMA, summary="Pay {amount} to {payee.name}")

    @pytest.mark.parametrize("reasons", ["Too much", [""], ["x" * 201], ["a"] * 13, [3]])
    def test_reject_reasons_are_a_short_list_of_texts(self, reasons: Any) -> None:
        with pytest.raises(ValueError, match="reject_reasons"):
            Tool("pay", "Pay.", SCHEMA, reject_reasons=reasons)

    def test_an_agent_file_overrides_the_summary_and_the_reasons(self) -> None:
        [agent] = parse(
            """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds:
        summary: "Pay {amount} to {to_account}"
        reject_reasons: [Not this month]
    script:
      - text: hi
"""
        )
        tool = registry.get("transfer_funds").with_overrides(
            agent["tool_overrides"]["transfer_funds"]
        )
        shown = presentation.snapshot(tool)
        assert shown["summary"] == "Pay {amount} to {to_account}"
        assert shown["reject_reasons"] == ["Not this month"]
        assert shown["description"] == "Transfer money between two accounts."
        assert shown["approve_does"] == "The agent runs transfer_funds with these arguments."

    def test_an_agent_file_with_a_bad_summary_is_refused(self) -> None:
        with pytest.raises(AgentFileError, match=r"tool_overrides.transfer_funds: summary names"):
            parse(
                """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {summary: "Pay {sum}"}
    script:
      - text: hi
"""
            )


class AskedViaTestCase:
    @pytest.mark.parametrize(
        "lineage, via",
        [
            ("main", ""),
            ("main → agent:research", ""),
            ("main → skill:writer → agent:research", "writer"),
            ("main → skill:writer → agent:a → agent:b", "writer, then a"),
        ],
    )
    def test_the_agents_in_between_are_named_without_main(self, lineage: str, via: str) -> None:
        assert presentation.asked_via(lineage) == via

    def test_the_asker_is_named_with_its_instance(self) -> None:
        assert presentation.asker("main", "payer") == "payer"
        assert presentation.asker("main → agent:researcher[2]", "researcher") == "researcher[2]"
        assert presentation.asker("main → skill:writer", "writer") == "writer"


@pytest.mark.django_db
def test_the_engine_keeps_the_presentation_with_the_suspension(load_agents: Any) -> None:
    from agents import starting
    from agents.engine import Engine
    from agents.models import AgentDefinition, Suspension, Thread

    load_agents(
        """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds]
    script:
      - text: Paying.
        tool_calls:
          - {name: transfer_funds, input: {from_account: A, to_account: B, amount: 5}}
"""
    )
    assert registry.get("transfer_funds").execution_mode == BLOCKING
    thread = starting.start_thread(AgentDefinition.objects.get(name="payer"), "go", None)
    Engine().advance(thread.pk)
    assert Thread.objects.get(pk=thread.pk).status == "suspended"
    s = Suspension.objects.get(thread=thread)
    template = "Transfer {amount} {currency} from {from_account} to {to_account}"
    assert s.presentation["summary"] == template
    shown = presentation.payload(s)
    assert shown["summary"] == "Transfer 5 from A to B"
    assert "Wrong amount" in shown["reject_reasons"]
    assert shown["approve_does"] == "The agent runs transfer_funds with these arguments."
