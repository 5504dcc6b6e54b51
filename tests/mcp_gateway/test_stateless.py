"""An upstream declared as speaking the stateless revision (`revision: 2026-07-28`): calls go
to it as single requests with no session, its `input_required` questions go to a person and
the call is made again with the answer, and gated calls reach it the same way."""

import datetime
import json
from collections.abc import Iterator
from typing import Any

import pytest

from agents.agentfiles import AgentFileError
from agents.models import Event
from mcp_gateway import upstreams
from mcp_gateway.models import Upstream as Row
from tests.conftest import wait_for
from tests.external.conftest import Later, Reviewer, token
from tests.mcp_gateway.conftest import Upstream, call

# Unquoted, as people write it: YAML reads it as a date, which the loader takes.
NOTES = """
mcp_servers:
  - name: notes
    url: {url}
    revision: 2026-07-28
    trust_annotations: true
"""


def text(result: Any) -> str:
    return " ".join(c.text for c in result.content)


@pytest.fixture(scope="module")
def stateless_upstream(tmp_path_factory: Any) -> Iterator[Upstream]:
    server = Upstream(tmp_path_factory.mktemp("stateless"), mode="json")
    server.start()
    yield server
    server.stop()


class StatelessTestCase:
    @pytest.fixture(autouse=True)
    def setup(
        self,
        stateless_upstream: Upstream,
        gateway_url: str,
        load_agents: Any,
        worker: Any,
        users: dict[str, Any],
        reviewer: Reviewer,
    ) -> None:
        stateless_upstream.calls.unlink(missing_ok=True)
        load_agents(NOTES.format(url=stateless_upstream.url))
        self.upstream = stateless_upstream
        self.url = f"{gateway_url}/mcp/notes"
        self.reviewer = reviewer
        self.token = token(users["operator"], "runs")

    def call_later(self, tool: str, arguments: dict[str, Any]) -> Later:
        return Later(lambda: call(self.url, self.token, tool, arguments))

    def test_the_revision_is_stored_as_written(self) -> None:
        assert Row.objects.get(name="notes").revision == "2026-07-28"

    def test_an_immediate_call_is_relayed_and_audited(self) -> None:
        result = call(self.url, self.token, "read_note", {"name": "todo"})
        assert not result.is_error and text(result) == "note todo: hello"
        [event] = wait_for(
            lambda: list(Event.objects.filter(type=Event.Type.MCP_TOOL_CALLED)),
            what="the call's event",
        )
        assert event.payload["agent"] == "notes" and event.payload["outcome"] == "ok"

    def test_an_input_required_question_goes_to_a_person_and_the_call_is_made_again(
        self,
    ) -> None:
        held = self.call_later("choose_name", {"suggested": "todo"})
        [s] = wait_for(lambda: self.reviewer.pending("notes"), timeout=30, what="a question")
        assert (s["kind"], s["tool"], s["agent"]) == ("input", "choose_name", "notes")
        assert "Save the note as todo?" in s["prompt"]
        assert s["schema"]["properties"]["overwrite"]["type"] == "boolean"
        answer = {"name": "todo.md", "overwrite": True}
        answered = self.reviewer.http.post(
            f"/api/threads/{s['thread']}/suspensions/{s['id']}/resume",
            json={"response": json.dumps(answer)},
        )
        assert answered.status_code == 202, answered.text
        result = held.result()
        assert not result.is_error, text(result)
        assert text(result) == 'chose {"name": "todo.md", "overwrite": true}'

    def test_an_approved_call_reaches_it_without_a_session(self) -> None:
        held = self.call_later("delete_file", {"path": "/tmp/old"})
        self.reviewer.decide("notes", {"approved": True})
        result = held.result()
        assert not result.is_error, text(result)
        assert text(result) == "deleted /tmp/old"
        [done] = self.upstream.deleted()
        assert done["path"] == "/tmp/old" and done["session"] == ""
        # The call carried the stateless revision's envelope in its _meta.
        assert done["meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"


class RevisionFieldTestCase:
    def spec(self, revision: Any) -> dict[str, Any]:
        return {"name": "n", "url": "http://127.0.0.1:1/mcp", "revision": revision}

    def test_an_unknown_revision_is_refused_in_words(self) -> None:
        for wrong in ("2025-12-01", "latest", 7):
            with pytest.raises(AgentFileError, match="'revision' is one of"):
                upstreams.check(self.spec(wrong), "f.yaml")

    def test_a_2025_revision_is_kept_an_unquoted_date_too(self) -> None:
        for declared in ("2025-06-18", datetime.date(2025, 11, 25)):
            kept = upstreams.check(self.spec(declared), "f.yaml")["revision"]
            assert kept == str(declared)

    def test_left_out_it_is_the_newest_the_upstream_offers(self) -> None:
        spec = self.spec(None)
        assert upstreams.check(spec, "f.yaml")["revision"] == ""
