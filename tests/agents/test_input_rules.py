"""Input-required conversations (seeds/input-required-conversations.md): a turn that ends with
text waits for input and says so (INPUT_REQUIRED), a reply is checked against the asking
agent's input rules (INPUT_PROVIDED), and an input timeout cancels or tells the agent."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents import replies, starting
from agents.engine import Engine
from agents.models import AgentDefinition, Event, StackFrame, Thread


def conversation(**rules: Any) -> AgentDefinition:
    AgentDefinition.objects.create(
        name="clerk",
        model="scripted",
        description="Asks which form.",
        script=[
            {"text": "Which form: A or B?"},
            {"tool_calls": [{"name": "complete", "input": {"result": "Filed."}}]},
        ],
        **rules,
    )
    return AgentDefinition.objects.create(
        name="desk",
        model="scripted",
        sub_agents=["clerk"],
        script=[
            {"tool_calls": [{"name": "use_agent", "input": {"name": "clerk", "message": "file"}}]},
            {"text": "All done."},
        ],
    )


def waiting(users: Any, **rules: Any) -> Thread:
    thread = starting.start_thread(conversation(**rules), "go", users["reviewer"])
    Engine().advance(thread.pk)
    thread.refresh_from_db()
    assert thread.status == Thread.Status.WAITING_INPUT
    return thread


def last(thread: Thread, type: str) -> Event:
    return Event.objects.filter(thread=thread, type=type).latest("id")


@pytest.mark.django_db(transaction=True)
class InputRequiredTestCase:
    def test_a_question_emits_input_required_with_the_prompt_and_the_types(
        self, users: Any, settings: Any
    ) -> None:
        settings.INPUT_TIMEOUT_SECONDS = 0
        thread = waiting(users, input_types=["text/plain"], input_timeout=30)
        required = last(thread, "INPUT_REQUIRED").payload
        assert required["prompt"] == "Which form: A or B?"
        assert required["input_types"] == ["text/plain"]
        assert required["frame"] == "agent:clerk"
        assert thread.input_prompt == "Which form: A or B?"
        assert thread.input_expires_at is not None
        assert required["expires_at"] == thread.input_expires_at.isoformat()

    def test_an_accepted_reply_emits_input_provided_and_runs_the_thread(self, users: Any) -> None:
        thread = waiting(users)
        replies.provide_input(
            thread.pk, users["reviewer"], data={"form": "A"}, content_type="application/json"
        )
        provided = last(thread, "INPUT_PROVIDED").payload
        assert provided["type"] == "application/json" and provided["resumed"] is True
        assert provided["length"] == len('{"form": "A"}')
        thread.refresh_from_db()
        assert thread.status == "running" and thread.input_expires_at is None
        Engine().advance(thread.pk)
        thread.refresh_from_db()
        assert thread.status == "completed" and thread.result == "All done."

    @pytest.mark.parametrize(
        ("rules", "reply", "field"),
        [
            ({"input_types": ["application/json"]}, {"text": "A"}, "type"),
            ({}, {"text": "[1]", "content_type": "application/json"}, "data"),
            ({}, {"text": "{not json", "content_type": "application/json"}, "data"),
            # Numbers JSON has no room for, in a reply's text as in a request's body.
            ({}, {"text": '{"n": NaN}', "content_type": "application/json"}, "data"),
            ({}, {"text": '{"n": -Infinity}', "content_type": "application/json"}, "data"),
            ({}, {"text": '{"n": 1e400}', "content_type": "application/json"}, "data"),
            ({"input_max_chars": 5}, {"text": "A much longer answer"}, "text"),
            ({}, {"text": "x", "content_type": "image/png"}, "type"),
            ({}, {"text": "   "}, "text"),
        ],
    )
    def test_a_reply_against_the_rules_is_refused_and_changes_nothing(
        self, users: Any, rules: dict[str, Any], reply: dict[str, Any], field: str
    ) -> None:
        thread = waiting(users, **rules)
        top = StackFrame.objects.get(thread=thread, status="active", depth=1)
        before = (list(top.messages), Event.objects.filter(thread=thread).count())
        with pytest.raises(replies.BadInput) as refused:
            replies.provide_input(thread.pk, users["reviewer"], **reply)
        assert refused.value.field == field
        top.refresh_from_db()
        thread.refresh_from_db()
        assert thread.status == Thread.Status.WAITING_INPUT
        assert (top.messages, Event.objects.filter(thread=thread).count()) == before


@pytest.mark.django_db(transaction=True)
class InputTimeoutTestCase:
    def test_a_timeout_cancels_the_thread_by_default(self, users: Any) -> None:
        thread = waiting(users, input_timeout=10)
        assert replies.expire_inputs(now=timezone.now()) == 0  # not yet
        later = thread.input_expires_at + timedelta(milliseconds=1)
        assert replies.expire_inputs(now=later) == 1
        thread.refresh_from_db()
        assert thread.status == Thread.Status.CANCELLED
        timeout = last(thread, "INPUT_TIMEOUT").payload
        assert timeout["on_timeout"] == "cancel" and timeout["prompt"] == "Which form: A or B?"
        cancelled = last(thread, "THREAD_CANCELLED").payload
        assert cancelled["reason"] == "no answer came before the input timeout"
        assert replies.expire_inputs(now=later) == 0  # once

    def test_a_timeout_can_tell_the_agent_and_go_on(self, users: Any) -> None:
        thread = waiting(users, input_timeout=10, on_input_timeout="continue")
        assert replies.expire_inputs(now=thread.input_expires_at) == 1
        thread.refresh_from_db()
        assert thread.status == Thread.Status.RUNNING
        top = StackFrame.objects.get(thread=thread, status="active", depth=1)
        said = top.messages[-1]["content"][-1]["text"]
        assert said == "The user did not answer within 10 seconds."
        Engine().advance(thread.pk)
        thread.refresh_from_db()
        assert thread.status == "completed"

    def test_no_timeout_means_waiting_for_ever(self, users: Any, settings: Any) -> None:
        settings.INPUT_TIMEOUT_SECONDS = 0
        thread = waiting(users)
        assert thread.input_expires_at is None
        assert replies.expire_inputs(now=timezone.now() + timedelta(days=365)) == 0


@pytest.mark.django_db
class InputRulesInAgentFilesTestCase:
    def test_the_rules_are_read_and_stored(self, tmp_path: Any) -> None:
        from agents import agentfiles

        path = tmp_path / "a.yaml"
        path.write_text(
            "agents:\n  - name: clerk\n    script: [{text: Which one}]\n"
            "    input_max_chars: 200\n    input_types: [application/json]\n"
            "    input_timeout: 60\n    on_input_timeout: continue\n"
        )
        ((clerk, _),) = agentfiles.load([path])
        clerk.refresh_from_db()
        assert clerk.input_max_chars == 200 and clerk.input_types == ["application/json"]
        assert clerk.input_timeout == 60 and clerk.on_input_timeout == "continue"
        rules = replies.input_rules(clerk)
        assert rules.max_chars == 200 and rules.types == ("application/json",)

    @pytest.mark.parametrize(
        ("line", "says"),
        [
            ("input_max_chars: 0", "input_max_chars"),
            ("input_types: [image/png]", "input_types"),
            ("input_types: []", "input_types"),
            ("input_timeout: -1", "input_timeout"),
            ("on_input_timeout: retry", "on_input_timeout"),
        ],
    )
    def test_bad_rules_are_refused(self, line: str, says: str) -> None:
        from agents import agentfiles

        text = f"agents:\n  - name: clerk\n    script: [{{text: Which one}}]\n    {line}\n"
        with pytest.raises(agentfiles.AgentFileError, match=says):
            agentfiles.parse(text)
