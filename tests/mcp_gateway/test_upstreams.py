"""Upstreams declared under `mcp_servers:` in agent files (mcp_gateway.upstreams)."""

from types import SimpleNamespace
from typing import Any

import pytest

from agents import versions
from agents.agentfiles import AgentFileError
from agents.models import AgentDefinition
from mcp_gateway import actions
from mcp_gateway.models import Upstream
from mcp_gateway.upstreams import expand, is_immediate

FILE = """
mcp_servers:
  - name: files
    url: http://127.0.0.1:9301/mcp
    headers: {Authorization: "Bearer ${FILES_TOKEN}"}
    trust_annotations: true
    tool_overrides:
      delete_file: {execution_mode: blocking, timeout: 600, on_timeout: reject}
      write_note: {execution_mode: immediate}
    policy: {four_eyes: true}
    reminders: [5m]
"""


class UpstreamsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, load_agents: Any) -> None:
        self.load = load_agents

    def test_the_compiled_read_gives_the_row_the_orm_gives(self) -> None:
        from django.forms.models import model_to_dict

        from mcp_gateway.statements import upstream_named

        self.load(FILE + "    callers: [ops]\n")
        compiled, orm = upstream_named("files"), Upstream.objects.get(name="files")
        assert compiled is not None
        assert model_to_dict(compiled) == model_to_dict(orm)
        assert compiled.pk == orm.pk and compiled.updated_at == orm.updated_at
        assert compiled.tool_overrides["write_note"] == {"execution_mode": "immediate"}
        assert upstream_named("nope") is None

    def test_a_file_of_upstreams_alone_loads_and_keeps_headers_unexpanded(self) -> None:
        self.load(FILE)
        files = Upstream.objects.get(name="files")
        assert files.headers == {"Authorization": "Bearer ${FILES_TOKEN}"}
        assert files.reminders == [300] and files.policy == {"four_eyes": True}
        assert expand(files.headers, {"FILES_TOKEN": "s3cret"}) == {
            "Authorization": "Bearer s3cret"
        }

    def test_loading_again_updates_by_name(self) -> None:
        self.load(FILE)
        self.load(FILE.replace("9301", "9302"))
        assert Upstream.objects.get().url == "http://127.0.0.1:9302/mcp"

    def test_every_tool_waits_unless_declared_immediate_or_trusted_read_only(self) -> None:
        self.load(FILE)
        files = Upstream.objects.get()
        assert is_immediate(files, "write_note", read_only=False)
        assert is_immediate(files, "read_note", read_only=True)
        assert not is_immediate(files, "delete_file", read_only=True)
        assert not is_immediate(files, "rename", read_only=False)
        files.trust_annotations = False
        assert not is_immediate(files, "read_note", read_only=True)

    @pytest.mark.parametrize(
        "change, says",
        [
            (("name: files", "name: 'no spaces'"), "'name' must be a slug"),
            (("url: http://127.0.0.1:9301/mcp", "url: ftp://x"), "'url'"),
            (("execution_mode: blocking,", "execution_mode: later,"), "execution_mode"),
            (("trust_annotations: true", "trust: true"), "unknown field"),
        ],
    )
    def test_a_bad_upstream_is_refused_and_nothing_is_stored(
        self, change: tuple[str, str], says: str
    ) -> None:
        with pytest.raises(AgentFileError, match=says):
            self.load(FILE.replace(*change))
        assert not Upstream.objects.exists()


class VersionsTestCase:
    """An upstream's rules are versioned as an agent's are (mcp_gateway.upstreams.mirror)."""

    @pytest.fixture(autouse=True)
    def setup(self, load_agents: Any, users: dict[str, Any]) -> None:
        self.load = load_agents
        self.users = users

    def test_a_changed_policy_is_a_new_version_and_an_older_request_asks_to_confirm_it(
        self,
    ) -> None:
        self.load(FILE)
        agent = AgentDefinition.objects.get(name="files")
        assert agent.policy == {"four_eyes": True} and agent.version == 1
        self.load(FILE)  # the same again: no new version
        assert AgentDefinition.objects.get(name="files").version == 1
        tool = SimpleNamespace(input_schema={"type": "object"}, description="Delete a file.")
        upstream = Upstream.objects.get()
        s = actions.attach_or_raise(
            upstream, self.users["operator"], "delete_file", {"path": "/a"}, tool
        )
        assert s.agent_version == 1
        self.load(FILE.replace("policy: {four_eyes: true}", "policy: {groups: [ops]}"))
        assert AgentDefinition.objects.get(name="files").version == 2
        # As the API and A2A check a decision before they make it (approvals.api.decisions).
        with pytest.raises(versions.Unbound, match="confirmVersionChange") as refused:
            versions.check(s, {"approved": True})
        assert refused.value.code == "version_changed"
        assert "policy" in refused.value.detail
        versions.check(s, {"approved": True, "confirmVersionChange": True})
        versions.check(s, {"approved": False})  # saying no never needs it

    def test_an_agent_the_gateway_runs_may_not_share_the_name(self) -> None:
        self.load("agents:\n  - name: files\n    model: scripted\n    script: [{text: hi}]\n")
        with pytest.raises(AgentFileError, match="taken by an agent the gateway runs"):
            self.load(FILE)


STDIO = """
mcp_servers:
  - name: local
    command: [python, -m, some_server]
    env: {API_KEY: "${LOCAL_KEY}"}
"""


class StdioUpstreamsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, load_agents: Any) -> None:
        self.load = load_agents

    def test_a_stdio_upstream_keeps_its_command_and_env_unexpanded(self) -> None:
        self.load(STDIO)
        local = Upstream.objects.get(name="local")
        assert local.command == ["python", "-m", "some_server"] and local.url == ""
        assert local.env == {"API_KEY": "${LOCAL_KEY}"}

    def test_an_upstream_moved_from_a_url_to_a_command_forgets_its_url(self) -> None:
        self.load(FILE.replace("name: files", "name: local"))
        self.load(STDIO)
        local = Upstream.objects.get(name="local")
        assert local.url == "" and local.command == ["python", "-m", "some_server"]

    @pytest.mark.parametrize(
        "change, says",
        [
            (
                ("    env:", "    url: http://127.0.0.1:9301/mcp\n    env:"),
                "exactly one of 'url' .* and 'command'",
            ),
            (("    command: [python, -m, some_server]\n", ""), "exactly one of 'url'"),
            (("[python, -m, some_server]", "python -m some_server"), "'command' must be a list"),
            (("[python, -m, some_server]", "[]"), "'command' must be a list"),
            (('{API_KEY: "${LOCAL_KEY}"}', "[API_KEY]"), "'env' must map"),
            (("    env:", "    headers: {X: y}\n    env:"), "'headers' are for a URL"),
        ],
    )
    def test_a_bad_stdio_upstream_is_refused_and_nothing_is_stored(
        self, change: tuple[str, str], says: str
    ) -> None:
        with pytest.raises(AgentFileError, match=says):
            self.load(STDIO.replace(*change))
        assert not Upstream.objects.exists()


class AdminFormTestCase:
    """The admin's form refuses what a file would, in the same words."""

    def form(self, **fields: Any) -> Any:
        from mcp_gateway.admin import UpstreamForm

        data = {
            "name": "files",
            "url": "",
            "command": "[]",
            "env": "{}",
            "headers": "{}",
            "tool_overrides": "{}",
            "policy": "{}",
            "reminders": "[]",
            **fields,
        }
        return UpstreamForm(data=data)

    def test_a_url_or_a_command_but_not_both(self, db: Any) -> None:
        assert self.form(url="http://127.0.0.1:9301/mcp").is_valid()
        assert self.form(command='["python", "-m", "server"]').is_valid()
        both = self.form(url="http://127.0.0.1:9301/mcp", command='["python"]')
        assert not both.is_valid() and "url" in str(both.errors)
        assert not self.form().is_valid()

    def test_a_bad_override_is_refused(self, db: Any) -> None:
        bad = self.form(
            url="http://127.0.0.1:9301/mcp", tool_overrides='{"rm": {"execution_mode": "later"}}'
        )
        assert not bad.is_valid() and "execution_mode" in str(bad.errors)
