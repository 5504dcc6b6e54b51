"""An agent built with the OpenAI Agents SDK (the real openai-agents package, its scripted
model, no network) in a process of its own asks the gateway before it pays: it stops, the
request waits in the inbox, a reviewer decides in the browser, and the agent goes on; the
tool runs once at most."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from agents.models import Event, Suspension
from tests.conftest import ROOT, wait_for
from tests.e2e.conftest import Site
from tests.external.conftest import approve_edited, token

SCRIPT = Path(__file__).with_name("openai_agent.py")
AGENT = "billing-sdk"


class OutsideAgent:
    """tests/external/openai_agent.py, started outside the repository (see its docstring)."""

    def __init__(self, url: str, agent_token: str, run_id: str, timeout: int = 600) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="outside-agent-"))
        self.ran_file = self.dir / "ran.jsonl"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
        env["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(SCRIPT),
                url,
                agent_token,
                run_id,
                str(self.ran_file),
                str(timeout),
            ],
            cwd=self.dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def ran(self) -> list[dict[str, Any]]:
        if not self.ran_file.exists():
            return []
        return [json.loads(line) for line in self.ran_file.read_text().splitlines()]

    def finish(self, timeout: float = 60) -> str:
        out, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, err[-3000:]
        return json.loads(out.strip().splitlines()[-1])["final"]


def card(page: Any, s: Suspension) -> Any:
    return page.locator(f"#s-{s.id}")


class OpenAIAgentsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, users: dict[str, Any]) -> None:
        self.site = site
        self.token = token(users["operator"], "runs")
        self.agents: list[OutsideAgent] = []
        yield
        for agent in self.agents:
            if agent.proc.poll() is None:
                agent.proc.kill()
                agent.proc.wait()

    def start(self, run_id: str, timeout: int = 600) -> OutsideAgent:
        agent = OutsideAgent(self.site.server.url, self.token, run_id, timeout)
        self.agents.append(agent)
        return agent

    def waiting(self, agent: OutsideAgent) -> Suspension:
        def found() -> Suspension | None:
            if agent.proc.poll() is not None:
                raise AssertionError(agent.proc.stderr.read()[-3000:])
            return Suspension.objects.filter(agent_name=AGENT, status="pending").first()

        return wait_for(found, timeout=60, what="the SDK agent's request")

    def test_the_agent_stops_and_pays_once_the_reviewer_approves(self) -> None:
        page = self.site.login("reviewer")
        agent = self.start("sdk-run-1")
        s = self.waiting(agent)
        box = card(page, s)
        expect(box).to_be_visible()
        expect(box.locator(".tool")).to_have_text("pay")
        expect(box.locator(".prompt")).to_have_text("Pay invoice 118?")
        expect(box).to_contain_text("Pay an invoice.")  # the tool's description
        assert agent.proc.poll() is None and agent.ran() == []  # stopped, nothing paid
        self.site.shoot(page, "external-openai-agents-inbox-desktop")
        box.get_by_role("button", name="Approve", exact=True).click()
        assert agent.finish() == "Finished: paid 120 to ACME"
        assert agent.ran() == [{"amount": 120, "to": "ACME"}]
        assert Event.objects.filter(type=Event.Type.AGENT_RESUMED, suspension_id=s.id).count() == 1

    def test_an_edit_in_the_browser_is_what_the_agent_pays(self) -> None:
        page = self.site.login("reviewer")
        agent = self.start("sdk-run-2")
        s = self.waiting(agent)
        box = card(page, s)
        approve_edited(box, {"amount": "90"})
        assert agent.finish() == "Finished: paid 90 to ACME"
        assert agent.ran() == [{"amount": 90, "to": "ACME"}]
        # The second call, with exactly the approved arguments, asked nobody again.
        assert Suspension.objects.filter(agent_name=AGENT).count() == 1

    def test_a_rejection_reaches_the_model(self) -> None:
        page = self.site.login("reviewer")
        agent = self.start("sdk-run-3")
        s = self.waiting(agent)
        box = card(page, s)
        box.get_by_role("button", name="Reject…").click()
        box.locator("input[name=reason]").fill("wrong payee")
        box.get_by_role("button", name="Reject", exact=True).click()
        assert agent.finish() == "Finished: Rejected by alice: wrong payee"
        assert agent.ran() == []

    def test_the_deadline_rejects_and_the_agent_goes_on(self) -> None:
        agent = self.start("sdk-run-4", timeout=2)
        s = self.waiting(agent)
        final = agent.finish()
        assert final == "Finished: Nobody approved this call before its deadline; it was not run."
        s.refresh_from_db()
        assert s.status == "timed_out" and agent.ran() == []


def test_the_sdk_is_not_the_gateway_s_agents_package() -> None:
    """The runner runs outside the repository: there `agents` is the SDK's package."""
    probe = "import agents, sys; print(agents.__file__)"
    where = subprocess.run(
        [sys.executable, "-c", probe], cwd=tempfile.gettempdir(), capture_output=True, text=True
    ).stdout
    assert not where.startswith(str(ROOT / "agents"))
