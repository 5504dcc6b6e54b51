"""The examples for outside agents in docs/connect/ run as written (with GATEWAY_URL and
GATEWAY_TOKEN set) against a live gateway, a reviewer deciding over the API meanwhile: the
Python ones, and docs/connect/rest.md's curl walk-through (raise, wait, read). The
OpenAI Agents SDK example calls OpenAI's model; tests/external/openai_agent.py runs its flow
offline instead."""

import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Any

from agents import agentfiles
from tests.conftest import ROOT
from tests.external.conftest import Later, Reviewer

# The pages of docs/connect/ whose first Python block is an outside agent, in this order.
PAGES = ("rest.md", "langgraph.md", "openai-agents.md")


def examples() -> list[str]:
    found = []
    for page in PAGES:
        text = (ROOT / "docs" / "connect" / page).read_text()
        found.append(re.search(r"```python\n(.*?)```", text, re.S).group(1))
    return found


def run_example(code: str, url: str, token: str) -> Later:
    env = {**os.environ, "GATEWAY_URL": url, "GATEWAY_TOKEN": token}
    env.pop("PYTHONPATH", None)

    def run() -> str:
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tempfile.mkdtemp(prefix="readme-example-"),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    return Later(run)


def test_the_docs_have_an_example_per_adapter() -> None:
    found = examples()
    assert len(found) == 3
    assert "approval_client.langgraph" in found[1] and "approval_client.openai_agents" in found[2]


def test_the_client_example(gateway_url: str, agent_token: str, reviewer: Reviewer) -> None:
    example = run_example(examples()[0], gateway_url, agent_token)
    asked = reviewer.decide(
        "billing-bot", {"approved": True, "modifiedArgs": {"amount": 100, "to": "ACME"}}
    )
    assert asked["prompt"] == "Pay 120 EUR to ACME?"
    reviewer.decide("billing-bot", {"response": "The EU account"})
    out = example.result()
    assert out.splitlines() == ["paid 100 EUR to ACME", "answer: The EU account"]


def test_the_langgraph_example(gateway_url: str, agent_token: str, reviewer: Reviewer) -> None:
    example = run_example(examples()[1], gateway_url, agent_token)
    reviewer.decide("billing-graph", {"approved": False, "reason": "already paid"})
    out: Any = example.result()
    assert "not paid: pay was rejected by alice: already paid" in out


def test_the_agent_file_for_an_outside_agent_loads() -> None:
    """docs/connect/rest.md's agent file: a scripted agent with a script, rules on the whole
    agent (an outside agent's tools are not registered)."""
    text = (ROOT / "docs" / "connect" / "rest.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.S).group(1)
    [agent] = agentfiles.parse(block, "docs/connect/rest.md")
    assert agent["name"] == "billing-bot"
    assert agent["policy"]["quorum"] == 2 and agent["policy"]["auto_approve"]


def curl_walkthrough() -> str:
    text = (ROOT / "docs" / "connect" / "rest.md").read_text()
    match = re.search(r"<!-- curl-walkthrough:.*?-->\n```sh\n(.*?)```", text, re.S)
    assert match, "docs/connect/rest.md has no curl walk-through"
    return match.group(1)


def run_curl(url: str, token: str) -> Later:
    """The walk-through in bash, as a reader pastes it, with errors stopping it."""
    env = {**os.environ, "GATEWAY_URL": url, "GATEWAY_TOKEN": token}
    return Later(
        lambda: subprocess.run(
            ["bash", "-euo", "pipefail", "-c", curl_walkthrough()],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    )


def test_the_curl_walkthrough(gateway_url: str, agent_token: str, reviewer: Reviewer) -> None:
    """Raised, waited for by long polls while a reviewer approves an edit, read: the agent
    acts with the edited arguments."""
    script = run_curl(gateway_url, agent_token)
    asked = reviewer.decide(
        "billing-bot", {"approved": True, "modifiedArgs": {"amount": 100, "to": "ACME"}}
    )
    assert asked["prompt"] == "Pay 120 EUR to ACME?" and asked["tool"] == "pay"
    done = script.result(timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "is waiting for a person" in done.stdout
    [paid] = [line for line in done.stdout.splitlines() if line.startswith("paying ")]
    assert json.loads(paid.removeprefix("paying ")) == {"amount": 100, "to": "ACME"}
    assert '"decided_by": "alice"' in done.stdout


def test_the_curl_walkthrough_reads_a_rejection(
    gateway_url: str, agent_token: str, reviewer: Reviewer
) -> None:
    script = run_curl(gateway_url, agent_token)
    reviewer.decide("billing-bot", {"approved": False, "reason": "already paid"})
    done = script.result(timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not paid: already paid" in done.stdout and "paying" not in done.stdout
