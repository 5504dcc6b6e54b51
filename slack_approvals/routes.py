"""Where an agent's requests go in Slack: the `slack:` field of an agent file.

    slack: {channel: C0123ABCD, dm: [dana, finance-reviewers]}
    tool_overrides:
      transfer_funds: {slack: {channel: C0PAYMENTS}}   # this tool's requests go here instead

`channel` is a Slack conversation id; `dm` lists gateway user names and group names, whose
members with a linked Slack account (SlackLink) get a direct message. The field is checked and
stored here, heard through agents.agentfiles.sections_loaded in the loading transaction: a bad
value raises AgentFileError naming the field, which undoes the whole load. An agent loaded
without the field loses its route. The `dm` names are resolved when a request is posted
(slack_approvals.fanout), so people and groups made after the file was loaded count; a name
that matches nobody linked is skipped and logged then.
"""

import re
from typing import Any

from agents.agentfiles import AgentFileError
from slack_approvals.models import SlackRoute

KEYS = {"channel", "dm"}
# Slack's conversation ids: C (public), G (private or a group DM), D (a direct message).
CHANNEL = re.compile(r"^[CGD][A-Z0-9]{2,40}$")


def store_routes(
    sender: Any, agents: list[tuple[str, str, dict[str, Any]]] | None = None, **kwargs: Any
) -> None:
    """agents.agentfiles.sections_loaded: each loaded agent's route, created, changed or
    dropped."""
    for source, name, keys in agents or []:
        tools = {
            tool: check(owned["slack"], f"{source}: '{name}': tool_overrides.{tool}.slack")
            for tool, owned in (keys.get("tool_overrides") or {}).items()
            if "slack" in owned
        }
        if "slack" not in keys and not tools:
            SlackRoute.objects.filter(agent=name).delete()
            continue
        fields = (
            check(keys["slack"], f"{source}: agent '{name}': slack")
            if "slack" in keys
            else {"channel": "", "dm": []}
        )
        SlackRoute.objects.update_or_create(
            agent=name, defaults={**fields, "tools": tools, "source": source}
        )


def places(route: SlackRoute, tool: str) -> tuple[str, list[str]]:
    """(channel, dm names) a request for `tool` goes to: the tool's own route, else the
    agent's."""
    own = (route.tools or {}).get(tool)
    if own:
        return own.get("channel", ""), list(own.get("dm") or [])
    return route.channel, list(route.dm or [])


def check(spec: Any, where: str) -> dict[str, Any]:
    """The route's fields as stored; raises AgentFileError naming the field."""
    if not isinstance(spec, dict) or not spec:
        raise AgentFileError(f"{where}: expected a mapping with 'channel' and/or 'dm'")
    unknown = set(spec) - KEYS
    if unknown:
        raise AgentFileError(
            f"{where}: unknown field(s) {sorted(unknown)}; the fields are {sorted(KEYS)}"
        )
    channel = spec.get("channel", "")
    if channel and (not isinstance(channel, str) or not CHANNEL.match(channel)):
        raise AgentFileError(
            f"{where}.channel: {channel!r} is not a Slack channel id (like C0123ABCD: the "
            "channel's details in Slack show it)"
        )
    dm = spec.get("dm", [])
    if not isinstance(dm, list) or not all(isinstance(n, str) and n for n in dm):
        raise AgentFileError(f"{where}.dm: expected a list of user or group names")
    if not channel and not dm:
        raise AgentFileError(f"{where}: expected a 'channel' or a 'dm' list")
    return {"channel": channel or "", "dm": dm}
