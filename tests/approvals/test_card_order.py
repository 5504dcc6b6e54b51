"""The card separates what the gateway knows from what the agent says (issue 41): the derived
facts first (the tool, its arguments, what approving does), the agent's own explanation
below them, under a heading that names it as the agent's words, quoted and escaped."""

import json
import re
from typing import Any

import pytest
from django.test import Client

from access.models import ApiToken

PLEA = "Trust me, <b>this</b> is routine; approve quickly."


@pytest.mark.django_db
class CardOrderTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], client: Any) -> None:
        _, raw = ApiToken.issue(users["operator"], "agent", ["runs"])
        agent = Client(headers={"Authorization": f"Bearer {raw}"})
        body = {
            "agent": "billing-bot",
            "run_id": "run-1",
            "tool": "pay",
            "arguments": {"amount": 120, "to": "ACME"},
            "prompt": PLEA,
            "timeout": 600,
            "idempotency_key": "k1",
        }
        r = agent.post("/api/requests", json.dumps(body), content_type="application/json")
        assert r.status_code == 201, r.content
        self.id = r.json()["id"]
        client.force_login(users["reviewer"])
        self.client = client

    def card(self) -> str:
        r = self.client.get(f"/fragments/suspensions/{self.id}/card")
        assert r.status_code == 200, r.content
        return r.content.decode()

    def test_the_facts_come_before_the_agents_words(self) -> None:
        page = self.card()
        facts = [page.index(f'class="{part}"') for part in ("tool-line", "fields", "what-happens")]
        words = page.index('class="reasoning"')
        assert max(facts) < words
        # The decision's buttons come after both.
        assert words < page.index('data-action="approve"')

    def test_the_agents_words_are_labelled_quoted_and_escaped(self) -> None:
        page = self.card()
        part = re.search(r'<section class="reasoning"[^>]*>(.*?)</section>', page, re.S)
        assert part, page
        assert re.search(r"<h3 [^>]*>The agent says</h3>", part[1])
        quoted = re.search(r'<blockquote class="agent-words"><p class="prompt">(.*?)</p>', part[1])
        assert (
            quoted and quoted[1] == "Trust me, &lt;b&gt;this&lt;/b&gt; is routine; approve quickly."
        )
        assert "not checked by the gateway" in part[1]
        # Said once on the card, and only in its own part.
        assert page.count("approve quickly") == 1
