"""AGENT_MAX_TOKENS: the output limit of an agent whose file sets no max_tokens."""

from typing import Any

from agents.agentfiles import parse

FILE = """
agents:
  - name: plain
    model: scripted
    script: [{text: Hello.}]
  - name: wordy
    model: scripted
    script: [{text: Hello.}]
    max_tokens: 8000
"""


def test_the_setting_is_the_default_and_the_file_wins(settings: Any) -> None:
    settings.AGENT_MAX_TOKENS = 1234
    plain, wordy = parse(FILE)
    assert plain["max_tokens"] == 1234
    assert wordy["max_tokens"] == 8000
