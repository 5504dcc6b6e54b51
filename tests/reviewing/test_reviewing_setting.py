"""A `review:` setting is checked where it is declared (an agent file, an MCP server's
policy), and the card shows what the model said as the model's, escaped and bounded."""

from typing import Any

import pytest
from django.template.loader import render_to_string

from agents.agentfiles import AgentFileError, parse
from agents.reviewing import answers
from agents.reviewing.setting import Setting
from agents.rules import PolicyError, check_keys


def checked(review: Any) -> dict[str, Any]:
    return check_keys({"review": review}, "policy")["review"]


class SettingTestCase:
    def test_the_defaults_fill_what_is_left_out(self) -> None:
        assert checked({"model": "claude-haiku-4-5"}) == {
            "model": "claude-haiku-4-5",
            "mode": "shadow",
            "may": ["approve", "reject"],
            "timeout": 10,
            "per_minute": 30,
            "irreversible": False,
            "script": [],
        }

    @pytest.mark.parametrize(
        ("review", "words"),
        [
            ({"mode": "shadow"}, "policy.review.model: a Claude model id"),
            ({"model": "claude-haiku-4-5", "mode": "auto"}, "policy.review.mode: one of shadow"),
            ({"model": "claude-haiku-4-5", "may": ["escalate"]}, "policy.review.may"),
            ({"model": "claude-haiku-4-5", "timeout": 0}, "policy.review.timeout"),
            ({"model": "claude-haiku-4-5", "per_minute": True}, "policy.review.per_minute"),
            ({"model": "scripted"}, "a scripted reviewer needs its answers"),
            (
                {"model": "claude-haiku-4-5", "script": [{"decision": "approve"}]},
                "only a scripted reviewer has a script",
            ),
            (
                {"model": "scripted", "script": [{"decision": "yes"}]},
                "policy.review.script[0].decision",
            ),
            ({"model": "claude-haiku-4-5", "prompt": "be nice"}, "unknown key(s) ['prompt']"),
        ],
    )
    def test_a_setting_that_cannot_work_is_refused_naming_its_key(
        self, review: dict[str, Any], words: str
    ) -> None:
        with pytest.raises(PolicyError) as refused:
            checked(review)
        assert words in str(refused.value)

    def test_an_agent_file_with_a_bad_setting_is_refused(self, db: Any) -> None:
        text = """
agents:
  - name: clerk
    model: scripted
    tools: [transfer_funds]
    policy:
      tools: {transfer_funds: {review: {model: claude-haiku-4-5, mode: decide, may: [edit]}}}
    script: [{text: hi}]
"""
        with pytest.raises(AgentFileError, match=r"policy\.tools\.transfer_funds\.review\.may"):
            parse(text)

    def test_the_digest_changes_with_the_setting(self) -> None:
        one = Setting.of(checked({"model": "claude-haiku-4-5", "mode": "decide"}))
        two = Setting.of(
            checked({"model": "claude-haiku-4-5", "mode": "decide", "may": ["approve"]})
        )
        assert answers.digest(one) != answers.digest(two)
        assert answers.digest(one) == answers.digest(Setting.of(one.kept()))


class AnswerTestCase:
    @pytest.mark.parametrize(
        "found",
        [
            {"decision": "approve"},
            {"decision": "maybe", "reason": "?"},
            {"decision": "approve", "reason": ""},
            {"decision": "approve", "reason": "ok", "also": "approve the next ten"},
            ["approve"],
        ],
    )
    def test_an_answer_of_another_shape_is_a_failure(self, found: Any) -> None:
        with pytest.raises(answers.ReviewFailed, match="malformed answer"):
            answers.checked(found)


def card(review: dict[str, Any]) -> str:
    return render_to_string("approvals/_model_review.html", {"c": {"review": review}})


class CardTestCase:
    def test_the_recommendation_is_labelled_and_its_reason_escaped_and_bounded(self) -> None:
        html = card(
            {
                "model": "claude-haiku-4-5",
                "mode": "shadow",
                "recommendation": "approve",
                "reason": "<script>alert(1)</script>" + "x" * 2000,
                "outcome": "recommended",
            }
        )
        assert 'aria-label="Reviewing model"' in html
        assert "Recommends: approve." in html
        assert "recommends only" in html
        assert "<script>" not in html
        assert "&lt;script&gt;" in html
        assert "x" * 700 not in html

    def test_a_failure_says_the_request_is_left_to_people_and_why(self) -> None:
        html = card(
            {
                "model": "claude-haiku-4-5",
                "mode": "decide",
                "outcome": "failed",
                "error": "timeout: no answer within 10 s",
            }
        )
        assert "No answer: left to people." in html
        assert "timeout: no answer within 10 s" in html

    def test_nothing_is_shown_when_no_model_was_asked(self) -> None:
        assert card({}).strip() == ""
