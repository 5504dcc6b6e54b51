"""Demo tools: harmless, and visible in the DemoAction table, so a person can see an approved
action happen and a rejected one not."""

import time
from typing import Any

from agents.runtime.tools import BLOCKING, ToolContext, ToolError, registry
from demo.models import DemoAction


def _note(context: ToolContext, tool: str, args: dict[str, Any], summary: str) -> str:
    # Keyed by the call's idempotency key: a call started again after a crash is done once.
    DemoAction.objects.get_or_create(
        idempotency_key=context.idempotency_key,
        defaults={"thread_id": context.run, "tool": tool, "arguments": args, "summary": summary},
    )
    return summary


@registry.tool(
    "delete_records",
    description="Delete records from a table (demo: writes what it would delete to the demo log).",
    summary="Delete {count} records from {table}",
    reject_reasons=("Keep them: they are still needed", "Back them up first", "Wrong table"),
    input_schema={
        "type": "object",
        "properties": {
            "table": {"type": "string", "minLength": 1},
            "count": {"type": "integer", "minimum": 1, "maximum": 100000},
        },
        "required": ["table", "count"],
        "additionalProperties": False,
    },
)
def delete_records(args: dict[str, Any], context: ToolContext) -> str:
    return _note(
        context, "delete_records", args, f"Deleted {args['count']} records from {args['table']}."
    )


@registry.tool(
    "lookup_account",
    description="Look up a bank account's holder and balance.",
    input_schema={
        "type": "object",
        "properties": {"account": {"type": "string", "minLength": 1}},
        "required": ["account"],
        "additionalProperties": False,
    },
)
def lookup_account(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    account = args["account"]
    if account.startswith("closed"):
        raise ToolError(f"Account {account} is closed.")
    return {
        "account": account,
        "holder": f"Holder of {account}",
        "balance": 1250.00,
        "currency": "EUR",
    }


@registry.tool(
    "transfer_funds",
    description="Transfer money between two accounts.",
    summary="Transfer {amount} {currency} from {from_account} to {to_account}",
    reject_reasons=(
        "Wrong amount",
        "Wrong recipient account",
        "Already paid",
        "Needs the invoice checked first",
    ),
    input_schema={
        "type": "object",
        "properties": {
            "from_account": {"type": "string", "minLength": 1},
            "to_account": {"type": "string", "minLength": 1},
            "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000000},
            "currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
        },
        "required": ["from_account", "to_account", "amount"],
        "additionalProperties": False,
    },
    execution_mode=BLOCKING,
    timeout=600,
    risk="high",
)
def transfer_funds(args: dict[str, Any], context: ToolContext) -> str:
    currency = args.get("currency", "EUR")
    return _note(
        context,
        "transfer_funds",
        args,
        f"Transferred {args['amount']} {currency} "
        f"from {args['from_account']} to {args['to_account']}.",
    )


@registry.tool(
    "send_email",
    description="Send an email (demo: writes it to the demo log).",
    summary="Email “{subject}” to {to}",
    reject_reasons=("Wrong recipients", "Not ready to announce", "Fix the wording first"),
    input_schema={
        "type": "object",
        "properties": {
            "to": {"type": "string", "minLength": 3},
            "subject": {"type": "string"},
            "body": {"type": "string"},
        },
        "required": ["to", "subject"],
        "additionalProperties": False,
    },
    execution_mode=BLOCKING,
)
def send_email(args: dict[str, Any], context: ToolContext) -> str:
    return _note(context, "send_email", args, f"Sent '{args['subject']}' to {args['to']}.")


@registry.tool(
    "pause",
    description="Wait a few seconds, as a slow lookup would (demo: does nothing else).",
    input_schema={
        "type": "object",
        "properties": {"seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 10}},
        "required": ["seconds"],
        "additionalProperties": False,
    },
)
def pause(args: dict[str, Any], context: ToolContext) -> str:
    time.sleep(args["seconds"])
    return f"Paused {args['seconds']:g} s."


def _task(context: ToolContext) -> str:
    """The text of the calling frame's opening message: an agent-tool instance's input."""
    messages = getattr(context.frame, "messages", None) or []
    content = messages[0].get("content") if messages else ""
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content if b.get("type") == "text")


# Every instance of an agent plays the same script, whatever its input; this tool lets a
# scripted agent tell its inputs apart: the demo's `researcher` turns to displayConfirmation
# (through `if_error`) only for the task about customers.
@registry.tool(
    "screen_task",
    description=(
        "Check your task against the policy: a task that concerns customers needs a reviewer's "
        "approval before you report on it. Fails, saying so, when it does."
    ),
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
)
def screen_task(args: dict[str, Any], context: ToolContext) -> str:
    if "customer" in _task(context).lower():
        raise ToolError("This task concerns customers: ask a reviewer before you report on it.")
    return "This task needs no review."
