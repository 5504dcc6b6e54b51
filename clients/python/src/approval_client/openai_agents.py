"""OpenAI Agents SDK: tool approvals decided by the gateway's reviewers.

    gw = AsyncGateway(URL, TOKEN, agent="billing-agent")
    approvals = GatewayApprovals(gw)
    pay = approvals.gate(function_tool(pay))         # needs_approval backed by the gateway
    agent = Agent(name="billing", tools=[pay], ...)
    result = await approvals.run(agent, "Pay invoice 118")

`gate` sets the tool's `needs_approval` to a function that raises the gateway request for the
call (its idempotency key is the call's id, within the client's run) and answers whether a
person must decide: no when the gateway's policy approved it at once, yes otherwise. The run
then stops with the call among `result.interruptions`. `apply(result)` finds each interrupted
call's request (the same one: same key), waits for its decision, and applies it to the run's
RunState: `approve`, or `reject` with a message saying who rejected it and why (or that
nobody answered before the deadline). `run` repeats run → apply → run until no approval is
left.

Edited arguments: the SDK runs an approved call with the arguments the model sent (it refuses
a call whose arguments changed under its id), so an approval with edited arguments is applied
as a rejection whose message gives the model the approved arguments and asks it to call the
tool again with exactly those; that call needs no second approval (`needs_approval` answers
no for arguments a reviewer approved, once).

This module imports the SDK's top-level package `agents`: use it in the outside agent's own
process (the gateway's Django app has a package of the same name).
"""

import json
from typing import Any

from agents import Agent, FunctionTool, RunContextWrapper, Runner, RunState
from approval_client.client import AsyncGateway, Request


def _canonical(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)


class GatewayApprovals:
    """Approvals for one run of an SDK agent, through one AsyncGateway (its run id)."""

    def __init__(self, gateway: AsyncGateway, **options: Any) -> None:
        self.gateway = gateway
        # raise_request options for every call: timeout, on_timeout, policy.
        self.options = options
        self.schemas: dict[str, dict[str, Any]] = {}
        self.descriptions: dict[str, str] = {}
        # (tool, canonical arguments) a reviewer approved as an edit, not yet called again.
        self.edits: set[tuple[str, str]] = set()

    def gate(self, tool: FunctionTool, prompt: str | None = None) -> FunctionTool:
        """`tool`, its calls decided by the gateway's reviewers."""
        self.schemas[tool.name] = tool.params_json_schema
        self.descriptions[tool.name] = tool.description
        name = tool.name

        async def needs_approval(
            context: RunContextWrapper[Any], arguments: dict[str, Any], call_id: str
        ) -> bool:
            edit = (name, _canonical(arguments))
            if edit in self.edits:
                self.edits.discard(edit)
                return False  # exactly what a reviewer approved: it runs once, unasked
            made = await self.request(name, arguments, call_id, prompt)
            return not (made.status == "approved" and made.approved)

        tool.needs_approval = needs_approval
        return tool

    async def request(
        self, tool: str, arguments: dict[str, Any], call_id: str, prompt: str | None = None
    ) -> Request:
        return await self.gateway.raise_request(
            tool,
            arguments,
            key=f"call-{call_id}",
            schema=self.schemas.get(tool),
            description=self.descriptions.get(tool),
            prompt=prompt or f"The agent wants to call {tool}.",
            **self.options,
        )

    async def apply(self, result: Any, within: float | None = None) -> RunState:
        """Wait for the gateway's decision on each of the run's interruptions and apply it to
        the RunState, which is returned for Runner.run to go on with."""
        state = result.to_state()
        for item in result.interruptions:
            arguments = json.loads(item.arguments or "{}")
            made = await self.request(item.tool_name, arguments, item.raw_item.call_id)
            decided = await self.gateway.wait(made, within)
            if decided.approved:
                approved = decided.arguments if decided.arguments is not None else arguments
                if _canonical(approved) == _canonical(arguments):
                    state.approve(item)
                    continue
                self.edits.add((item.tool_name, _canonical(approved)))
                state.reject(
                    item,
                    rejection_message=(
                        f"A reviewer ({decided.decided_by}) approved this call with other "
                        f"arguments: {json.dumps(approved)}. Call {item.tool_name} again with "
                        "exactly these arguments."
                    ),
                )
                continue
            if decided.status == "timed_out":
                why = "Nobody approved this call before its deadline; it was not run."
            else:
                who = decided.decided_by or "the gateway"
                why = f"Rejected by {who}" + (f": {decided.reason}" if decided.reason else ".")
            state.reject(item, rejection_message=why)
        return state

    async def run(
        self, agent: Agent, input: Any, within: float | None = None, **options: Any
    ) -> Any:
        """Runner.run until the run needs no more approvals; `options` go to Runner.run."""
        result = await Runner.run(agent, input, **options)
        while result.interruptions:
            state = await self.apply(result, within)
            result = await Runner.run(agent, state, **options)
        return result
