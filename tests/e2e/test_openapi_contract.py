"""The API against its OpenAPI document, on a live daphne: schemathesis calls every operation
the document describes with generated and fuzzed input (valid and not), and no answer may be
a 5xx, an undocumented status, or a body that does not match its schema. And /api/docs shows
the document with the vendored Swagger UI under the site's CSP."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from access.models import ApiToken
from agents import events
from agents.models import Event
from tests.approvals import state
from tests.conftest import ARTIFACTS
from tests.e2e.conftest import DESKTOP, PASSWORD, PHONE
from webhooks.models import Delivery, Subscription

CHECKS = ",".join(
    (
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
    )
)


def schemathesis(location: Path, url: str, token: str) -> subprocess.CompletedProcess:
    """Run schemathesis in the document's folder (it keeps its run data in ./.schemathesis).
    CONTRACT_EXAMPLES (25 per operation) and CONTRACT_SEED (1) fuzz harder or elsewhere."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "run",
            location,
            *("--url", url),
            *("-H", f"Authorization: Bearer {token}"),
            *("--checks", CHECKS),
            *("--max-examples", os.environ.get("CONTRACT_EXAMPLES", "25")),
            *("--seed", os.environ.get("CONTRACT_SEED", "1")),
            *("--workers", "1"),
            *("--request-timeout", "30"),
            "--no-color",
        ],
        cwd=location.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )


class ContractTestCase:
    @pytest.fixture(autouse=True)
    def setup(
        self, transactional_db: Any, daphne_server: Any, users: dict[str, Any], tmp_path: Path
    ) -> None:
        self.server = daphne_server
        self.tmp = tmp_path
        if daphne_server.proc is None or daphne_server.proc.poll() is not None:
            daphne_server.start()
        # The admin may call every operation (staff, every scope), so the fuzzing reaches past
        # the permission checks into each view.
        _, self.token = ApiToken.issue(users["admin"], "schemathesis")
        self.users = users

    def document(self) -> dict[str, Any]:
        r = httpx.get(
            f"{self.server.url}/api/openapi.json",
            headers={"Authorization": f"Bearer {self.token}"},
        )
        assert r.status_code == 200, r.text
        return r.json()

    def test_every_operation_answers_as_documented_with_no_server_error(self) -> None:
        doc = self.document()
        operations = sum(len(item) for item in doc["paths"].values())
        # Run from the served document saved as a file: loaded from its URL, schemathesis
        # leaves out the operation that serves the document itself.
        location = self.tmp / "openapi.json"
        location.write_text(json.dumps(doc))
        result = schemathesis(location, self.server.url, self.token)
        report = result.stdout + result.stderr
        assert result.returncode == 0, report[-20000:]
        # Every operation of the document was called (none left out, none skipped).
        counted = re.search(r"Operations:\s+(\d+) selected / (\d+) total", report)
        tested = re.search(r"Tested:\s+(\d+)", report)
        assert counted and tested, report[-4000:]
        labels = sorted(f"{m.upper()} {p}" for p, item in doc["paths"].items() for m in item)
        assert (int(counted[1]), int(counted[2]), int(tested[1])) == (operations,) * 3, (
            labels,
            report,
        )

    def test_on_real_rows_too(self) -> None:
        """The same, with each path parameter pinned to a row that exists (a pending
        suspension of a suspended run, its events, a webhook subscription and a delivery),
        so the generated bodies reach the decisions, extensions, replies and replays."""
        state.agent("payer")
        thread, [suspension] = state.suspended(self.users["operator"])
        event = Event.objects.filter(thread=thread).latest("id")
        sub = Subscription.objects.create(url="https://hooks.example.com/x", owner=None)
        events.record("AGENT_MESSAGE", payload={"n": 1})
        delivery = Delivery.objects.create(
            subscription=sub, event=event, webhook_id="msg_contract", status="failed"
        )
        pinned = {
            "thread_id": str(thread.pk),
            "suspension_id": str(suspension.pk),
            "event_id": event.pk,
            "subscription_id": str(sub.pk),
            "delivery_id": delivery.pk,
        }
        doc = self.document()
        for item in doc["paths"].values():
            for op in item.values():
                for param in op.get("parameters", ()):
                    if param["in"] == "path" and param["name"] in pinned:
                        param["schema"] = {"enum": [pinned[param["name"]]]}
        location = self.tmp / "openapi.json"
        location.write_text(json.dumps(doc))
        result = schemathesis(location, self.server.url, self.token)
        assert result.returncode == 0, (result.stdout + result.stderr)[-20000:]


class DocsPageTestCase:
    def test_the_docs_page_shows_every_operation_under_the_csp(
        self, transactional_db: Any, daphne_server: Any, browser: Any, users: dict[str, Any]
    ) -> None:
        from django.contrib.auth.hashers import PBKDF2PasswordHasher

        if daphne_server.proc is None or daphne_server.proc.poll() is not None:
            daphne_server.start()
        reviewer = users["reviewer"]
        hasher = PBKDF2PasswordHasher()
        reviewer.password = hasher.encode(PASSWORD, hasher.salt(), iterations=1000)
        reviewer.save(update_fields=["password"])
        url = daphne_server.url
        # Not logged in: the page sends people to the login, the document answers 401.
        assert httpx.get(f"{url}/api/openapi.json").status_code == 401
        for name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            context = browser.new_context(viewport=viewport)
            page = context.new_page()
            # The viewer is 1.7 MB of script: give a loaded CI machine time to run it.
            page.set_default_timeout(60000)
            problems: list[str] = []
            page.on("pageerror", lambda e, problems=problems: problems.append(str(e)))
            page.on(
                "console",
                lambda m, problems=problems: m.type == "error" and problems.append(m.text),
            )
            page.on(
                "response",
                lambda r, problems=problems: (
                    r.status >= 400
                    and "/login/" not in r.url
                    and problems.append(f"{r.status} {r.url}")
                ),
            )
            page.goto(f"{url}/api/docs")
            page.wait_for_url(f"{url}/login/?next=/api/docs")
            page.fill("input[name=username]", reviewer.username)
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{url}/api/docs")
            page.wait_for_selector(".opblock-summary-path")
            paths = page.locator(".opblock").count()
            doc = httpx.get(
                f"{url}/api/openapi.json",
                headers={"Authorization": f"Bearer {ApiToken.issue(reviewer, 'docs')[1]}"},
            ).json()
            assert paths == sum(len(item) for item in doc["paths"].values())
            assert page.get_by_text("/api/threads/{thread_id}/suspensions/").count() >= 2
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / f"api-docs-{name}.png"))
            # Swagger UI runs from the site's own files: no CSP refusal, no script error.
            assert not problems, problems
            context.close()
