"""The reference pages are complete: every environment variable the code reads is in
docs/settings.md, and every field the agent-file loader accepts is in docs/agent-files.md.
The lists come from the code (the settings module's reads, the loader's own key sets), so a
setting or field added without its line fails here."""

import ast
import re
from pathlib import Path

from agents import agentfiles, owned_fields, rules
from agents.runtime import tools
from mcp_gateway import upstreams
from slack_approvals import routes
from tests.conftest import ROOT

# The helpers of gateway/settings.py that read one variable, named by their first argument.
READERS = {"envbool", "envint", "envtimeout", "envrate", "envstr", "envseconds", "_origins"}
# Modules beside the settings that read the environment: `manage.py serve`'s options and the
# scripted model's pace. (gateway/testenv.py sets the tests' variables, it reads none.)
READING_MODULES = ("gateway/settings.py", "gateway/management/commands/serve.py", "agents/runtime")
# Read, but not settings: Django's own, and serve's word to the processes it starts.
NOT_SETTINGS = {"DJANGO_SETTINGS_MODULE", "GATEWAY_READY_FILE"}


def _env_name(node: ast.Call) -> ast.expr | None:
    """The first argument of a read of the environment, else None."""
    func = node.func
    if isinstance(func, ast.Name) and func.id in READERS:
        return node.args[0] if node.args else None
    if (
        isinstance(func, ast.Attribute)
        and func.attr in ("get", "getenv")
        and ast.unparse(func.value) in ("os.environ", "os")
        and node.args
    ):
        return node.args[0]
    return None


def names_read(source: str, kinds: list[str]) -> set[str]:
    """Every variable `source` reads. A name built from `{_kind}` (the task time limits) stands
    for each kind of task."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        arg = _env_name(node) if isinstance(node, ast.Call) else None
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            arg = node.slice
        if arg is None:
            continue
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            found.add(arg.value)
        elif isinstance(arg, ast.JoinedStr) and "{_kind}" in ast.unparse(arg):
            pattern = ast.unparse(arg)[2:-1]  # f"{_kind}_TASK_TIME_LIMIT" -> {_kind}_TASK_...
            found.update(pattern.replace("{_kind}", kind) for kind in kinds)
        elif ast.unparse(arg) in ("name", "f'{name}_FILE'"):
            continue  # the helpers' own bodies: os.environ.get(name), NAME_FILE
        else:
            raise AssertionError(f"an environment read this test cannot name: {ast.unparse(arg)}")
    return found - NOT_SETTINGS


def settings_read() -> set[str]:
    from django.conf import settings

    kinds = list(settings.TASK_TIME_LIMITS)
    files: list[Path] = []
    for module in READING_MODULES:
        path = ROOT / module
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    found = set()
    for path in files:
        found |= names_read(path.read_text(), kinds)
    # compose.yaml's own variables (`${SITE_ADDRESS:-localhost}`), which Caddy reads.
    found |= set(re.findall(r"\$\{([A-Z_]+)[:}-]", (ROOT / "compose.yaml").read_text()))
    return found


def documented(page: str) -> str:
    return (ROOT / "docs" / page).read_text()


def test_every_setting_the_code_reads_is_in_the_settings_page() -> None:
    read = settings_read()
    # The list is the code's: the ones the issue named are among them.
    assert {"GATEWAY_QUEUE", "GATEWAY_PREFIX", "INPUT_TIMEOUT_SECONDS", "SITE_ADDRESS"} <= read
    assert "RUN_TASK_SOFT_TIME_LIMIT" in read and "MCP_HOLD_SECONDS" in read
    page = documented("settings.md")
    missing = sorted(name for name in read if f"`{name}`" not in page)
    assert not missing, f"docs/settings.md does not list {missing}"


def test_the_settings_page_names_every_secret_that_may_come_from_a_file() -> None:
    """envstr() reads NAME or the file NAME_FILE names: the page's opening lists those."""
    tree = ast.parse((ROOT / "gateway" / "settings.py").read_text())
    secrets = {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "envstr"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }
    assert "SECRET_KEY" in secrets
    opening = documented("settings.md").split("| Variable |", 1)[0]
    assert not sorted(s for s in secrets if f"`{s}`" not in opening)


def sections(page: str) -> dict[str, str]:
    """The page's text under each `## ` heading."""
    parts = re.split(r"^## (.+)$", documented(page), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_agent_file_field_is_in_the_agent_files_page() -> None:
    wanted = {
        "Files": {"agents", *owned_fields.SECTIONS},
        "Agents": set(agentfiles.FIELDS),
        "Scripts": set(agentfiles.SCRIPT_TURN),
        "Tool overrides": set(tools.OVERRIDES) | set(owned_fields.AGENT_KEYS),
        "Policy": {*rules.KEYS, "tools", *rules.OPS},
        "Slack": set(routes.KEYS),
        "MCP servers": set(upstreams.FIELDS) | set(owned_fields.AGENT_KEYS),
    }
    found = sections("agent-files.md")
    missing = {
        section: sorted(key for key in keys if f"`{key}`" not in found.get(section, ""))
        for section, keys in wanted.items()
    }
    missing = {section: keys for section, keys in missing.items() if keys}
    assert not missing, f"docs/agent-files.md does not list, by section: {missing}"
    # An MCP server's tool_overrides take fewer keys than an agent's: the page names them.
    assert all(f"`{key}`" in found["MCP servers"] for key in upstreams.OVERRIDE_FIELDS)
