"""The A2A walk-through of docs/connect/a2a.md, run as written against the live server and
the demo agents."""

import os
import re
import subprocess
from typing import Any

import pytest

from tests.a2a.conftest import Gateway
from tests.conftest import ROOT

pytestmark = [pytest.mark.worker]


def walkthrough() -> str:
    text = (ROOT / "docs" / "connect" / "a2a.md").read_text()
    match = re.search(r"<!-- a2a walkthrough:.*?-->\n```sh\n(.*?)```", text, re.S)
    assert match, "docs/connect/a2a.md has no A2A walk-through block"
    return match.group(1)


class ReadmeTestCase:
    def test_the_a2a_walkthrough_works_as_written(self, gateway: Gateway, load_agents: Any) -> None:
        load_agents((ROOT / "demo" / "agents.yaml").read_text())
        script = walkthrough()
        script = script.replace("gw_paste_the_token_make_run_printed", gateway.token("reviewer"))
        host, port = gateway.url.removeprefix("http://").rsplit(":", 1)
        assert host == "127.0.0.1"  # the walk-through's host; the port comes from PORT

        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PORT": port},
        )

        assert result.returncode == 0, result.stdout + result.stderr
        out = result.stdout
        assert f'"endpoint": "{gateway.url}/a2a"' in out
        assert '"state": "TASK_STATE_INPUT_REQUIRED"' in out
        assert '"asks": "Which environment should I restart: staging or production?"' in out
        assert '"tool": "ask_user"' in out
        assert out.count('"TASK_STATE_COMPLETED"') == 3
        assert '"ROLE_USER: staging"' in out
        assert '"answer": "Thanks. I restarted the environment you named."' in out
        assert '"answer": "The invoice is paid."' in out
