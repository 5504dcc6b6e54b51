"""Agents as tools, driven step by step as the workers would: the seed's error handling (§4.2)
per call with siblings unaffected, its argument mapping, usage per frame, and the checks that
keep a duplicate delivery from doing anything."""

import json
from typing import Any

import pytest

from agents import deadlines, decisions, starting
from agents.engine import Engine
from agents.models import AgentDefinition, Event, StackFrame, Thread
from agents.runtime import messages as msgs
from agents.runtime.llm import LLMRequest, LLMResponse, ScriptedProvider

OK_CHILD = {"name": "fine", "description": "Answers.", "script": [{"text": "Fine."}]}


def define(name: str, script: list[dict[str, Any]], **fields: Any) -> AgentDefinition:
    return AgentDefinition.objects.create(name=name, model="scripted", script=script, **fields)


def parent(calls: list[dict[str, Any]], children: list[str]) -> AgentDefinition:
    return define(
        "boss",
        [{"tool_calls": calls}, {"text": "Batch done."}],
        agents_as_tools=children,
    )


def instances(thread: Thread) -> list[StackFrame]:
    return list(StackFrame.objects.filter(thread=thread, instance__gt=0).order_by("instance"))


def run_batch(engine: Engine, thread: Thread) -> None:
    """The parent's turn, every instance's run, then the parent's resumption."""
    assert engine.advance(thread.pk) is True
    for row in instances(thread):
        engine.advance_instance(row.pk)
    engine.advance(thread.pk)
    thread.refresh_from_db()


def results(thread: Thread) -> list[dict[str, Any]]:
    main = StackFrame.objects.get(thread=thread, depth=0)
    reply = main.messages[2]
    return [b for b in reply["content"] if b["type"] == "tool_result"]


class Boom:
    """A provider with a bug inside one child."""

    def complete(self, request: LLMRequest) -> LLMResponse:
        raise RuntimeError("the child's provider broke")


def provider(frame: Any) -> Any:
    if frame.agent_name == "buggy":
        return Boom()
    script = AgentDefinition.objects.get(name=frame.agent_name).script
    return ScriptedProvider(script)


@pytest.mark.django_db(transaction=True)
class InstanceErrorsTestCase:
    """Every failure inside an instance becomes that call's error result; siblings finish."""

    def test_each_row_of_the_seed_error_table(self, users: Any) -> None:
        define(**OK_CHILD)
        define("failing", [{"error": "The model is down."}])
        define(
            "looping",
            [{"tool_calls": [{"name": "pause", "input": {"seconds": 0.01}}]}] * 3,
            tools=["pause"],
            max_iterations=2,
        )
        define("buggy", [{"text": "never"}])
        boss = parent(
            [
                {"name": "agent__fine", "input": {"text": "one"}},
                {"name": "agent__nope", "input": {"text": "two"}},
                {"name": "agent__failing", "input": {"text": "three"}},
                {"name": "agent__looping", "input": {"text": "four"}},
                {"name": "agent__buggy", "input": {"text": "five"}},
            ],
            ["fine", "failing", "looping", "buggy"],
        )
        thread = starting.start_thread(boss, "go", users["operator"])
        run_batch(Engine(provider=provider), thread)

        assert thread.status == Thread.Status.COMPLETED, thread.error
        fine, nope, failing, looping, buggy = results(thread)
        assert fine == {
            "type": "tool_result",
            "tool_use_id": fine["tool_use_id"],
            "content": "Fine.",
        }
        assert nope["is_error"] and nope["content"] == "Unknown agent-tool: agent__nope"
        assert failing["is_error"] and failing["content"] == "Error: The model is down."
        assert looping["is_error"] and looping["content"].startswith(
            "Error: Agent 'looping' stopped"
        )
        assert buggy["is_error"] and buggy["content"] == "Error: the child's provider broke"
        # One instance per valid call, numbered in call order within the batch.
        assert [(f.instance_name, f.status) for f in instances(thread)] == [
            ("fine[1]", "completed"),
            ("failing[3]", "failed"),
            ("looping[4]", "failed"),
            ("buggy[5]", "failed"),
        ]
        finished = Event.objects.filter(thread=thread, type="INSTANCE_FINISHED")
        assert sorted(e.payload["status"] for e in finished) == ["done"] + ["failed"] * 3

    def test_argument_mapping_text_json_and_other(self, users: Any) -> None:
        define(**OK_CHILD)
        boss = parent(
            [
                {"name": "agent__fine", "input": {"text": "plain words", "json": {"x": 1}}},
                {"name": "agent__fine", "input": {"json": {"city": "Zürich", "n": 2}}},
                {"name": "agent__fine", "input": {"json": [1, 2]}},
                {"name": "agent__fine", "input": {"city": "Genève"}},
                {"name": "agent__fine", "input": {}},
            ],
            ["fine"],
        )
        thread = starting.start_thread(boss, "go", users["operator"])
        assert Engine().advance(thread.pk) is True
        given = [msgs.text_of(f.messages[0]["content"]) for f in instances(thread)]
        assert given[0] == "plain words"
        # A JSON text, non-ASCII kept as it is (PostgreSQL's jsonb may reorder the keys).
        assert "Zürich" in given[1] and json.loads(given[1]) == {"city": "Zürich", "n": 2}
        assert given[2] == "[1, 2]"  # json that is not an object: str()
        assert given[3] == '{"city": "Genève"}'  # no text, no json: the arguments as JSON
        assert given[4] == ""


@pytest.mark.django_db(transaction=True)
class InstanceBookkeepingTestCase:
    def test_a_duplicate_delivery_finds_nothing_to_do(self, users: Any) -> None:
        define(**OK_CHILD)
        boss = parent([{"name": "agent__fine", "input": {"text": "a"}}], ["fine"])
        thread = starting.start_thread(boss, "go", users["operator"])
        engine = Engine()
        assert engine.advance(thread.pk) is True
        (child,) = instances(thread)
        # The parent waits without a lease and is not runnable: the sweeper leaves it alone.
        thread.refresh_from_db()
        assert thread.status == "running" and thread.runnable_since is None
        assert thread.lease_owner == ""
        # A second delivery of the parent does not start the instance again.
        engine.advance(thread.pk)
        assert len(instances(thread)) == 1
        assert engine.advance_instance(child.pk) is True
        # A second delivery of the finished instance does nothing.
        assert engine.advance_instance(child.pk) is False
        # The instance woke its parent, which completes with the result.
        thread.refresh_from_db()
        assert thread.runnable_since is not None
        assert engine.advance(thread.pk) is True
        thread.refresh_from_db()
        assert thread.status == "completed"
        main = StackFrame.objects.get(thread=thread, depth=0)
        assert sum(1 for m in main.messages if m["role"] == "assistant") == 2

    def test_usage_and_tools_are_kept_per_frame(self, users: Any) -> None:
        define(
            "worker_bee",
            [{"tool_calls": [{"name": "pause", "input": {"seconds": 0.01}}]}, {"text": "Done."}],
            tools=["pause"],
        )
        boss = parent([{"name": "agent__worker_bee", "input": {"text": "a"}}], ["worker_bee"])
        thread = starting.start_thread(boss, "go", users["operator"])
        run_batch(Engine(), thread)
        (child,) = instances(thread)
        assert child.tools_used == ["pause"]
        assert child.input_tokens > 0 and child.output_tokens > 0
        main = StackFrame.objects.get(thread=thread, depth=0)
        assert main.tools_used == ["agent__worker_bee"]
        assert main.input_tokens > 0
        finished = Event.objects.get(thread=thread, type="INSTANCE_FINISHED")
        assert finished.payload["usage"] == {
            "input_tokens": child.input_tokens,
            "output_tokens": child.output_tokens,
        }
        assert finished.payload["tools"] == ["pause"]


def transfer(amount: int) -> dict[str, Any]:
    return {
        "name": "transfer_funds",
        "input": {"from_account": "A-1", "to_account": "B-2", "amount": amount},
    }


@pytest.mark.django_db(transaction=True)
class InstanceSuspensionsTestCase:
    """Deadlines, partial decisions of a group and nested sub-agents inside an instance."""

    def test_a_deadline_inside_an_instance_resumes_that_instance(self, users: Any) -> None:
        from datetime import timedelta

        from django.utils import timezone

        define(**OK_CHILD)
        define(
            "payer",
            [{"tool_calls": [transfer(5)]}, {"text": "Paid.", "if_error": {"text": "Not paid."}}],
            tools=["transfer_funds"],
            tool_overrides={"transfer_funds": {"timeout": 1}},
        )
        boss = parent(
            [
                {"name": "agent__fine", "input": {"text": "a"}},
                {"name": "agent__payer", "input": {"text": "b"}},
            ],
            ["fine", "payer"],
        )
        thread = starting.start_thread(boss, "go", users["operator"])
        engine = Engine()
        engine.advance(thread.pk)
        fine, payer = instances(thread)
        engine.advance_instance(fine.pk)
        engine.advance_instance(payer.pk)
        s = payer.suspensions.get()
        assert s.lineage == "main → agent:payer[2]"
        payer.refresh_from_db()
        assert payer.runnable_since is None and payer.status == "active"
        thread.refresh_from_db()
        # Nothing works: fine[1] ended, payer[2] waits, and so the run is suspended.
        assert thread.status == "suspended" and thread.runnable_since is None
        assert deadlines.expire_overdue(now=timezone.now() + timedelta(seconds=5)) == 1
        payer.refresh_from_db()
        assert payer.runnable_since is not None  # the deadline made the instance runnable
        thread.refresh_from_db()
        assert thread.status == "running" and thread.runnable_since is None  # still waiting
        assert engine.advance_instance(payer.pk) is True
        engine.advance(thread.pk)
        thread.refresh_from_db()
        assert thread.status == "completed"
        assert [r["content"] for r in results(thread)] == ["Fine.", "Not paid."]

    def test_a_group_inside_an_instance_resumes_when_its_last_call_is_decided(
        self, users: Any
    ) -> None:
        define(
            "payer",
            [{"tool_calls": [transfer(1), transfer(2)]}, {"text": "Both decided."}],
            tools=["transfer_funds"],
        )
        boss = parent([{"name": "agent__payer", "input": {"text": "pay"}}], ["payer"])
        thread = starting.start_thread(boss, "go", users["operator"])
        engine = Engine()
        engine.advance(thread.pk)
        (payer,) = instances(thread)
        engine.advance_instance(payer.pk)
        first, second = payer.suspensions.order_by("created_at")
        assert first.group == second.group
        decisions.decide(first, users["reviewer"], {"approved": True})
        payer.refresh_from_db()
        assert payer.runnable_since is None  # half a group decided: still waiting
        decisions.decide(second, users["reviewer"], {"approved": False, "reason": "no"})
        payer.refresh_from_db()
        assert payer.runnable_since is not None
        assert engine.advance_instance(payer.pk) is True
        engine.advance(thread.pk)
        thread.refresh_from_db()
        assert thread.status == "completed"
        assert results(thread)[0]["content"] == "Both decided."

    def test_sub_agents_inside_an_instance_stay_in_its_lane(self, users: Any) -> None:
        define(
            "helper",
            [{"text": "Helped."}],
            description="Helps.",
        )
        define(
            "manager",
            [
                {
                    "tool_calls": [
                        {"name": "use_agent", "input": {"name": "helper", "message": "x"}}
                    ]
                },
                {"text": "Managed."},
            ],
            sub_agents=["helper"],
        )
        boss = parent([{"name": "agent__manager", "input": {"text": "go"}}], ["manager"])
        thread = starting.start_thread(boss, "go", users["operator"])
        engine = Engine()
        engine.advance(thread.pk)
        (manager,) = instances(thread)
        assert engine.advance_instance(manager.pk) is True
        helper = StackFrame.objects.get(thread=thread, agent_name="helper")
        # The helper ran in the manager's lane: its text (no user to talk to) is its result.
        assert helper.lane_id == manager.pk and helper.status == "completed"
        assert helper.result == "Helped."
        pushed = Event.objects.get(thread=thread, type="FRAME_PUSHED")
        assert pushed.payload["lane"] == manager.pk
        engine.advance(thread.pk)
        thread.refresh_from_db()
        assert thread.status == "completed"
        assert results(thread)[0]["content"] == "Managed."
        # The main stack never showed the lane's frames.
        assert not StackFrame.objects.filter(thread=thread, status="active").exists()
