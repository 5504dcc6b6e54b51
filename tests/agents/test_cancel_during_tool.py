"""A cancel while a tool runs waits for its result (agents.cancelling), in the engine's own
terms: a tool inside an agent instance, a worker that dies during the tool, and a cancel
while no tool runs (during the model's call), which stays immediate."""

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from agents import cancelling, starting
from agents.engine import Engine
from agents.models import AgentDefinition, StackFrame, Thread
from agents.runtime.llm import LLMRequest, LLMResponse
from agents.runtime.tools import ToolContext
from tests.agents.test_tool_runs import agent, registry_with, run_in_background

CANCELLING = Thread.Status.CANCELLING


def slow_tool() -> tuple[threading.Event, threading.Event, Any]:
    started, release = threading.Event(), threading.Event()

    def slow(args: dict, context: ToolContext) -> str:
        started.set()
        release.wait(20)  # a bound, so a test that fails does not hang
        return "slow done"

    return started, release, slow


def types(thread: Thread) -> list[str]:
    return list(thread.events.order_by("id").values_list("type", flat=True))


def lane_in_background(engine: Engine, frame_id: int) -> tuple[threading.Thread, list]:
    out: list = []

    def target() -> None:
        try:
            out.append(engine.advance_instance(frame_id))
        finally:
            connection.close()

    runner = threading.Thread(target=target, daemon=True)
    runner.start()
    return runner, out


class Held:
    """A model whose answer (a call of `slow`) waits for the test's word."""

    def __init__(self) -> None:
        self.asked, self.answer = threading.Event(), threading.Event()

    def complete(self, request: LLMRequest, listener: Any = None) -> LLMResponse:
        self.asked.set()
        self.answer.wait(20)
        use = {"type": "tool_use", "id": "toolu_held", "name": "slow", "input": {"n": 1}}
        return LLMResponse(content=[use], stop_reason="tool_use")


@pytest.mark.django_db(transaction=True)
class CancelDuringToolTestCase:
    def test_a_tool_inside_an_agent_instance_is_recorded_before_the_cancel(
        self, users: Any
    ) -> None:
        started, release, slow = slow_tool()
        engine = Engine(tools=registry_with("slow", slow))
        AgentDefinition.objects.create(
            name="child",
            model="scripted",
            tools=["slow"],
            script=[{"tool_calls": [{"name": "slow", "input": {"n": 1}}]}, {"text": "Ok."}],
        )
        boss = AgentDefinition.objects.create(
            name="boss",
            model="scripted",
            agents_as_tools=["child"],
            script=[
                {"tool_calls": [{"name": "agent__child", "input": {"text": "go"}}]},
                {"text": "Batch done."},
            ],
        )
        thread = starting.start_thread(boss, "go", users["operator"])
        assert engine.advance(thread.pk) is True
        [lane] = StackFrame.objects.filter(thread=thread, instance__gt=0)
        runner, out = lane_in_background(engine, lane.pk)
        assert started.wait(10), "the tool never started"

        asked = cancelling.cancel_thread(thread.pk, users["reviewer"])
        assert asked.status == CANCELLING
        [waiting] = thread.events.filter(type="THREAD_CANCELLING")
        assert waiting.payload["waiting_for"] == ["slow"]

        release.set()
        runner.join(20)
        assert out == [True]
        thread.refresh_from_db()
        assert thread.status == Thread.Status.CANCELLED
        trail = types(thread)
        assert trail[-4:] == [
            "THREAD_CANCELLING",
            "TOOL_RESULT",
            "INSTANCE_FINISHED",
            "THREAD_CANCELLED",
        ]
        result = thread.events.get(type="TOOL_RESULT", payload__tool="slow")
        assert result.payload["content"] == "slow done"
        assert result.payload["lane"] == lane.pk
        lane.refresh_from_db()
        assert lane.status == StackFrame.Status.CANCELLED and lane.lease_owner == ""

    def test_a_worker_that_dies_during_the_tool_leaves_the_cancel_to_the_sweeper(
        self, users: Any
    ) -> None:
        started, release, slow = slow_tool()
        engine = Engine(tools=registry_with("slow", slow))
        thread = starting.start_thread(agent("slowpoke", "slow"), "go", users["operator"])
        runner, out = run_in_background(engine, thread.pk)
        assert started.wait(10), "the tool never started"
        assert cancelling.cancel_thread(thread.pk, users["reviewer"]).status == CANCELLING
        # While the worker lives, the sweeper leaves the cancel to it.
        assert cancelling.settle_abandoned() == 0

        # The worker is gone: nobody renews its lease, which runs out.
        past = timezone.now() - timedelta(seconds=1)
        Thread.objects.filter(pk=thread.pk).update(lease_owner="dead", lease_expires_at=past)
        assert cancelling.settle_abandoned() == 1
        thread.refresh_from_db()
        assert thread.status == Thread.Status.CANCELLED
        ended = thread.events.get(type="THREAD_CANCELLED")
        # The trail says which tool never returned: whether it acted is not known.
        assert ended.payload["tools_unfinished"] == ["slow"]
        assert ended.payload["cancelled_by"] == users["reviewer"].username
        assert ended.actor_name == users["reviewer"].username

        release.set()  # what the dead worker's tool did later is not its run's any more
        runner.join(20)
        assert not thread.events.filter(type="TOOL_RESULT").exists()
        assert types(thread)[-1] == "THREAD_CANCELLED"

    def test_a_cancel_while_no_tool_runs_is_immediate(self, users: Any) -> None:
        ran: list[int] = []
        model = Held()
        engine = Engine(
            tools=registry_with("slow", lambda args, context: ran.append(1) or "ran"),
            provider=lambda frame: model,
        )
        thread = starting.start_thread(agent("slowpoke", "slow"), "go", users["operator"])
        runner, out = run_in_background(engine, thread.pk)
        assert model.asked.wait(10), "the model was never called"

        # The model is answering: nothing has acted yet, so the run ends at once.
        asked = cancelling.cancel_thread(thread.pk, users["reviewer"])
        assert asked.status == Thread.Status.CANCELLED
        model.answer.set()
        runner.join(20)
        assert out == [True]
        # The call the model asked for after the cancel never ran.
        assert ran == []
        assert types(thread)[-1] == "THREAD_CANCELLED"
        assert not thread.events.filter(type__in=["TOOL_CALLED", "TOOL_RESULT"]).exists()
