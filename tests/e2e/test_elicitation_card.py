"""An MCP upstream's question (mcp_gateway.elicitation) on its inbox card in Chromium: a form
drawn from the requested schema, sent as a JSON object, or declined."""

import json
from typing import Any

import mcp_types as types
import pytest
from playwright.sync_api import expect

from agents.models import Suspension
from mcp_gateway import elicitation
from mcp_gateway.models import Upstream
from tests.conftest import wait_for
from tests.e2e.conftest import Site

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "overwrite": {"type": "boolean"},
        "colour": {"type": "string", "enum": ["red", "blue"]},
        "copies": {"type": "integer", "minimum": 1},
    },
    "required": ["name", "overwrite"],
}


def ask(caller: Any) -> Suspension:
    upstream = Upstream(name="files", url="http://127.0.0.1:1/mcp")
    params = types.ElicitRequestFormParams(message="Save as <b>todo</b>?", requested_schema=SCHEMA)
    asked = elicitation._question(upstream, caller, "confirm_name", params)
    return elicitation.raise_question(upstream, caller, "confirm_name", asked)


class ElicitationCardTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, users: dict[str, Any]) -> None:
        self.site = site
        self.caller = users["operator"]

    def test_the_form_is_answered_as_a_json_object(self) -> None:
        s = ask(self.caller)
        page = self.site.login("reviewer")
        box = page.locator(f"#s-{s.id}")
        expect(box.locator(".prompt")).to_contain_text("<b>todo</b>")
        box.locator("input[name=field-name]").fill("todo.md")
        box.locator("input[name=field-overwrite]").check()
        box.locator("select[name=field-colour]").select_option(label="blue")
        box.locator("input[name=field-copies]").fill("2")
        box.get_by_role("button", name="Send answer").click()
        s = wait_for(
            lambda: Suspension.objects.filter(pk=s.pk).exclude(status="pending").first(),
            what="the answer",
        )
        assert s.status == "approved"
        assert json.loads(s.response) == {
            "name": "todo.md",
            "overwrite": True,
            "colour": "blue",
            "copies": 2,
        }

    def test_a_question_is_declined(self) -> None:
        s = ask(self.caller)
        page = self.site.login("reviewer")
        page.locator(f"#s-{s.id}").get_by_role("button", name="Decline").click()
        s = wait_for(
            lambda: Suspension.objects.filter(pk=s.pk).exclude(status="pending").first(),
            what="the decision",
        )
        assert s.status == "rejected"
        assert elicitation.answer(s).action == "decline"
