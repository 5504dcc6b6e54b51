"""The JSON bodies of the runs and their decisions (an outside agent's request is
approvals.api.external.RaiseRequest). Each model is the body's whole contract: the view parses
the body with it (approvals.contract.parse) and the OpenAPI document describes the body with it
(approvals.openapi), so the two cannot drift apart.

`says` words what a refused field wants; the validators hold what a type cannot say (text
that is not blank, the MAX_* settings, read when a body comes so a changed setting applies,
and which fields go together).
"""

import json
from typing import Any, Literal, Self

from django.conf import settings
from pydantic import Field, ValidationInfo, field_validator, model_validator

from agents import external, grants
from approvals.contract import UNKNOWN, Inside, Wrong, body, inside, says, sent, within, written
from approvals.http import parse_uuid
from approvals.openapi import Body


class StartRun(Body):
    refused = "The run cannot start."
    says = {"agent": "Name the agent to run.", "message": "Write the first message."}

    agent: str = Field(description="The name of the agent to run.")
    message: str = Field(description="The first message (at most MAX_MESSAGE_CHARS).")

    @field_validator("agent")
    @classmethod
    def _known(cls, name: str, info: ValidationInfo) -> str:
        """A name, of an agent that exists when the view passes `agent_named` (a lookup)."""
        if not name:
            raise Wrong(says(cls, "agent"))
        named = (info.context or {}).get("agent_named")
        if named is None:
            return name
        agent = named(name)
        if agent is None:
            raise Wrong(f"No agent named {name!r}.")
        if agent.model == external.MODEL:
            # An MCP server's or an outside agent's: its requests come from outside, and no
            # model of the gateway runs it.
            raise Wrong(f"{name!r} is not run by the gateway: its requests come from outside.")
        return name

    @field_validator("message", mode="before")
    @classmethod
    def _written(cls, message: Any) -> str:
        return written(message, says(cls, "message"), settings.MAX_MESSAGE_CHARS)


class Message(Body):
    """Text, or `data` (a JSON object) for an agent that asks for application/json input."""

    refused = "The message is not valid."
    unknown = "The message has unknown fields."
    says = {"text": "Write a message.", "data": "JSON input must be an object."}

    text: str | None = Field(None, validate_default=True)
    data: dict[str, Any] | None = None

    @field_validator("text", mode="before")
    @classmethod
    def _written(cls, text: Any, info: ValidationInfo) -> str | None:
        if sent(info, "data"):
            return None  # the reply is the data (text beside it is refused there)
        return written(
            text,
            says(cls, "text"),
            settings.MAX_MESSAGE_CHARS,
            detail="The message is empty.",
            too_long="The message is too long.",
        )

    @field_validator("data", mode="before")
    @classmethod
    def _alone(cls, data: Any, info: ValidationInfo) -> Any:
        if sent(info, "text"):
            raise Wrong("Send one of them.", "Send text or data, not both.")
        if data is not None and not isinstance(data, dict):
            # As agents.replies words it (a null is for the agent's input rules to refuse).
            raise Wrong(says(cls, "data"), says(cls, "data"))
        return data


class Seen(Body):
    args_hash: str | None = None
    agent_version: int | None = None


class GrantTerms(Body):
    """A standing grant made with an approval (agents.grants): the next requests of this
    agent's tool whose arguments meet `conditions` are approved at once, for `seconds`, at
    most `max_uses` times, for any run, this `run` or this `requester` only."""

    refused = "The grant is not valid."
    unknown = "The grant has unknown fields."
    says = {
        "seconds": "How long it lasts, in seconds (at most MAX_GRANT_SECONDS).",
        "max_uses": "How many requests it may approve (at most MAX_GRANT_USES).",
        "conditions": "A list of conditions {arg, op, value}, as a policy's rules.",
        "scope": "any, run or requester.",
    }

    seconds: int = Field(description="Its lifetime, from 1 to MAX_GRANT_SECONDS.")
    max_uses: int = Field(description="How many requests it approves, 1 to MAX_GRANT_USES.")
    conditions: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Conditions on the arguments, all of which must hold: {arg, op, value} "
        "with op one of ==, !=, <, <=, >, >=, in, not in (agents.rules); none: any arguments.",
    )
    scope: Literal["any", "run", "requester"] = Field(
        "any", description="Any run, only this request's run, or only its requester's runs."
    )

    @model_validator(mode="after")
    def _terms(self) -> Self:
        try:
            grants.Terms.check(self.model_dump())
        except grants.GrantError as e:
            raise Wrong(e.detail, field=e.field) from None
        return self

    def terms(self) -> grants.Terms:
        return grants.Terms.check(self.model_dump())


# A decision is of one kind, told by its fields: `ignore`, else `response`, else an approval.
# A field of another kind is as unknown as a field the model does not name.
KINDS = {
    "ignore": ("ignore",),
    "response": ("response",),
    "approval": ("approved", "reason", "modifiedArgs", "grant"),
}


def decision_kind(data: dict[str, Any]) -> str:
    return "ignore" if "ignore" in data else "response" if "response" in data else "approval"


class Resume(Body):
    """resumeExecution, one decision kind a call: approve `{"approved": true}`; edit
    `{"approved": true, "modifiedArgs"}`; reject `{"approved": false, "reason"}`; respond
    `{"response"}` (the answer to a question, or a reviewer's response to a confirmation: the
    tool does not run and the agent gets the text as its result); ignore `{"ignore": true}`
    (dismissed from the inbox without deciding; the deadline still applies). An approval may
    carry `grant` (GrantTerms): it approves the next similar requests too. Which of accept,
    edit, respond and ignore a request takes is in its `policy.allow`: another is refused
    with 403 `forbidden_by_policy` (rule `not_allowed`)."""

    refused = "The decision is not valid."
    unknown = "Unknown fields."
    says = {
        "approved": "Send true or false.",
        "reason": "A string.",
        "modifiedArgs": "A JSON object of the tool's arguments.",
        "response": "Write an answer.",
        "ignore": "Send true.",
        "seen": "An object with args_hash and agent_version, as the request showed.",
        "seen.args_hash": "The request's args_hash, a string.",
        "seen.agent_version": "The request's agent_version, a whole number.",
        "confirmVersionChange": "Send true or false.",
        "grant": "An object: {seconds, max_uses, conditions, scope}.",
        **{f"grant.{k}": v for k, v in GrantTerms.says.items()},
    }

    approved: bool | None = Field(None, validate_default=True)
    reason: str | None = None
    modifiedArgs: dict[str, Any] | None = None
    response: str | None = None
    ignore: Literal[True] | None = Field(
        None, description="Dismiss from the inbox without deciding; alone."
    )
    seen: Seen | None = Field(None, description="What the card showed: a change answers 409.")
    confirmVersionChange: bool | None = None
    grant: GrantTerms | None = Field(
        None, description="With an approval: approve the next similar requests too."
    )

    @classmethod
    def _kind(cls, info: ValidationInfo) -> str:
        """The body's kind; refuses the field being checked when it is of another."""
        kind = decision_kind(body(info))
        name = info.field_name or ""
        if sent(info, name) and name not in KINDS[kind]:
            raise Wrong(UNKNOWN)
        return kind

    @field_validator("approved", mode="before")
    @classmethod
    def _yes_or_no(cls, approved: Any, info: ValidationInfo) -> Any:
        if cls._kind(info) == "approval" and not isinstance(approved, bool):
            raise Wrong(says(cls, "approved"))  # left out or null too: an approval says which
        return approved

    @field_validator("reason", mode="before")
    @classmethod
    def _reason(cls, reason: Any, info: ValidationInfo) -> Any:
        cls._kind(info)
        return within(reason, settings.MAX_REASON_CHARS)

    @field_validator("modifiedArgs", mode="before")
    @classmethod
    def _edited(cls, edited: Any, info: ValidationInfo) -> Any:
        cls._kind(info)
        limit = settings.MAX_ARGUMENTS_BYTES
        if isinstance(edited, dict) and (size := json_size(edited)) > limit:
            raise Wrong(f"At most {limit} bytes as JSON (these are {size}).")
        return edited

    @field_validator("response", mode="before")
    @classmethod
    def _answer(cls, response: Any, info: ValidationInfo) -> str:
        cls._kind(info)
        return written(
            response,
            says(cls, "response"),
            settings.MAX_MESSAGE_CHARS,
            detail="The answer is empty.",
            too_long="The answer is too long.",
        )

    @field_validator("ignore", mode="before")
    @classmethod
    def _ignore(cls, ignore: Any, info: ValidationInfo) -> Any:
        cls._kind(info)
        if ignore is not True:  # not 1, which Literal[True] takes
            raise Wrong(says(cls, "ignore"), "Send ignore: true, alone.")
        return ignore

    @field_validator("grant", mode="before")
    @classmethod
    def _grant(cls, grant: Any, info: ValidationInfo) -> Any:
        cls._kind(info)
        if grant is None:
            return None
        if body(info).get("approved") is not True:
            raise Wrong("A grant goes with an approval.", "grant goes with approved: true.")
        return inside(GrantTerms, grant, info, says(cls, "grant"))

    @model_validator(mode="after")
    def _edits_are_approvals(self) -> Self:
        if self.modifiedArgs is not None and not self.approved:
            raise Wrong(
                "Only an approval can edit the arguments.",
                "modifiedArgs goes with an approval.",
                field="modifiedArgs",
            )
        return self

    def decision(self) -> dict[str, Any]:
        """The decision as agents.decisions takes it: its kind's fields, then what the card
        showed (`seen`, as sent) and `confirmVersionChange` when they were sent."""
        found: dict[str, Any]
        if self.ignore:
            found = {"ignore": True}
        elif self.response is not None:
            found = {"response": self.response}
        else:
            found = {
                "approved": self.approved,
                "reason": self.reason or "",
                "modifiedArgs": self.modifiedArgs,
            }
        if self.seen is not None:
            found["seen"] = self.seen.model_dump(exclude_unset=True)
        if self.confirmVersionChange is not None:
            found["confirmVersionChange"] = self.confirmVersionChange
        if self.grant is not None:
            found["grant"] = self.grant.terms()
        return found


# POST /api/decisions decides at most this many suspensions a call.
MAX_DECISIONS = 100


class Decide(Body):
    """One item of POST /api/decisions: a suspension, and the decision resumeExecution would
    take for it."""

    refused = "A decision of the list is not valid."
    unknown = "A decision of the list has unknown fields."
    says = {
        "suspension": "A suspension's id (a UUID).",
        "decision": "A decision object, as resumeExecution takes it.",
    }

    suspension: str = Field(
        description="The suspension's id.", json_schema_extra={"format": "uuid"}
    )
    decision: Resume = Field(description="As the body of resumeExecution.")

    @field_validator("suspension", mode="before")
    @classmethod
    def _an_id(cls, suspension: Any) -> Any:
        if not isinstance(suspension, str) or parse_uuid(suspension) is None:
            raise Wrong(says(cls, "suspension"))
        return suspension

    @field_validator("decision", mode="before")
    @classmethod
    def _a_decision(cls, decision: Any, info: ValidationInfo) -> Resume:
        # A body of its own: Resume's validators read it as the body sent.
        return inside(Resume, decision, info, says(cls, "decision"))


ITEM = 'An object: {"suspension", "decision"}.'


def _how_many() -> str:
    return f"A list of 1 to {MAX_DECISIONS} decisions: {{suspension, decision}}."


class Decisions(Body):
    """POST /api/decisions: decide several suspensions in one call, each as resumeExecution
    would (the same checks, its own transaction, its own answer)."""

    refused = "The decisions are not valid."
    says = {"decisions": _how_many}

    decisions: list[Decide] = Field(min_length=1, max_length=MAX_DECISIONS)

    @field_validator("decisions", mode="before")
    @classmethod
    def _each(cls, items: Any, info: ValidationInfo) -> list[Decide]:
        """Each item parsed as a body of its own; every wrong item named by its index; a
        suspension listed twice refused (which decision would count?)."""
        if not isinstance(items, list) or not 1 <= len(items) <= MAX_DECISIONS:
            raise Wrong(_how_many())
        parsed: list[Decide] = []
        wrong: dict[str, str] = {}
        details: list[str] = []
        for i, item in enumerate(items):
            try:
                parsed.append(inside(Decide, item, info, ITEM))
            except Inside as e:
                wrong.update({f"{i}.{k}" if k else str(i): v for k, v in e.fields.items()})
                details.append(e.message)
            except Wrong as e:
                wrong[str(i)] = e.message
                details.append(Decide.refused)
        if not wrong:
            first: dict[Any, int] = {}
            for i, item in enumerate(parsed):
                pk = parse_uuid(item.suspension)
                if pk in first:
                    wrong[f"{i}.suspension"] = f"Listed already, as decisions.{first[pk]}."
                    details.append("Each suspension may be listed once.")
                first.setdefault(pk, i)
        if wrong:
            raise Inside(details[0], wrong)
        return parsed


def json_size(value: Any) -> int:
    """Bytes of `value` as compact UTF-8 JSON, so the limit does not depend on the escaping
    or spacing the client chose."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _extension_seconds() -> str:
    return f"A whole number of seconds from 1 to {settings.MAX_EXTENSION_SECONDS}."


class Extend(Body):
    refused = "The extension is not valid."
    says = {"seconds": _extension_seconds, "reason": "Say why the deadline moves."}

    seconds: int = Field(ge=1, description="1 to MAX_EXTENSION_SECONDS.")
    reason: str

    @field_validator("seconds")
    @classmethod
    def _at_most(cls, seconds: int) -> int:
        if seconds > settings.MAX_EXTENSION_SECONDS:
            raise Wrong(_extension_seconds())
        return seconds

    @field_validator("reason", mode="before")
    @classmethod
    def _why(cls, reason: Any) -> str:
        return written(reason, says(cls, "reason"), settings.MAX_REASON_CHARS).strip()
