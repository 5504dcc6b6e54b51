"""docs/slack.md says what the code does: its manifest asks for the scopes the gateway's calls
need and points at the interactions URL the gateway serves, its agent file's route loads, and
the settings it names exist (the audit events it names are this app's own)."""

import re
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.urls import resolve

from slack_approvals import links, routes
from slack_approvals.interactions import interactions

PAGE = Path(__file__).resolve().parents[2] / "docs" / "slack.md"


def yaml_blocks() -> list[Any]:
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", PAGE.read_text(), re.S)]


def test_the_manifest_asks_for_the_scopes_and_points_at_the_interactions_url() -> None:
    manifest = yaml_blocks()[0]
    assert manifest["oauth_config"]["scopes"]["bot"] == [
        "chat:write",
        "im:write",
        "users:read",
        "users:read.email",
    ]
    interactivity = manifest["settings"]["interactivity"]
    assert interactivity["is_enabled"] is True
    path = "/" + interactivity["request_url"].split("/", 3)[3]
    assert path == "/slack/interactions" and resolve(path).func is interactions


def test_the_agent_files_route_is_accepted() -> None:
    [agent] = yaml_blocks()[1]["agents"]
    assert routes.check(agent["slack"], "docs") == {
        "channel": "C0123ABCD",
        "dm": ["dana", "finance-leads"],
    }


def test_the_settings_it_names_exist() -> None:
    named = set(re.findall(r"`(SLACK_[A-Z_]+)`", PAGE.read_text()))
    assert named >= {"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_API_URL"}
    for name in named - {"SLACK_BOT_TOKEN_FILE", *links.Notice.values}:  # events, not settings
        assert hasattr(settings, name), name
