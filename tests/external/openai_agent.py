"""An outside agent built with the OpenAI Agents SDK and its scripted model (no network),
gated by the gateway: run by tests/external/test_openai_agents.py in a process of its own,
started outside the repository, because the SDK's package is named `agents`, as the gateway's
Django app is.

    python openai_agent.py URL TOKEN RUN_ID RAN_FILE [TIMEOUT]

Each run of the tool appends its arguments to RAN_FILE; the last line of stdout is the run's
final output as JSON.
"""

import asyncio
import json
import re
import sys
from typing import Any

from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from approval_client import AsyncGateway
from approval_client.openai_agents import GatewayApprovals

from agents import Agent, function_tool

AGENT = "billing-sdk"


def tool_output(call: ModelCall) -> str:
    """The last tool result the model was sent (an approval's result, or a rejection)."""
    outputs = [
        i for i in call.input if isinstance(i, dict) and i.get("type") == "function_call_output"
    ]
    return str(outputs[-1]["output"])


def after_decision(call: ModelCall) -> Any:
    """The model's turn after the decision: call again with the arguments a reviewer approved
    (the adapter's message gives them), or finish with what the tool said."""
    said = tool_output(call)
    edited = re.search(r"other arguments: (\{.*?\})\. Call", said)
    if edited:
        return [function_call("pay", json.loads(edited.group(1)), call_id="call_2")]
    return [assistant_message(f"Finished: {said}")]


async def main(url: str, token: str, run_id: str, ran_file: str, timeout: int) -> None:
    @function_tool
    def pay(amount: int, to: str) -> str:
        """Pay an invoice."""
        with open(ran_file, "a") as f:
            f.write(json.dumps({"amount": amount, "to": to}) + "\n")
        return f"paid {amount} to {to}"

    model = ScriptedModel(
        [
            [function_call("pay", {"amount": 120, "to": "ACME"}, call_id="call_1")],
            ModelStep.respond(after_decision),
            ModelStep.respond(after_decision),
        ]
    )
    async with AsyncGateway(url, token, agent=AGENT, run_id=run_id) as gw:
        approvals = GatewayApprovals(gw, timeout=timeout)
        agent = Agent(
            name=AGENT, model=model, tools=[approvals.gate(pay, prompt="Pay invoice 118?")]
        )
        result = await approvals.run(agent, "Pay invoice 118 to ACME.")
    print(json.dumps({"final": result.final_output}), flush=True)


if __name__ == "__main__":
    url, token, run_id, ran_file, *rest = sys.argv[1:]
    asyncio.run(main(url, token, run_id, ran_file, int(rest[0]) if rest else 600))
