"""A tool runs outside any transaction, under a lease a heartbeat keeps, at least once with a
stable idempotency key; a transient database error retries the step instead of failing it."""

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from agents import cancelling, deadlines, decisions, starting
from agents.engine import Engine
from agents.leases import Lease
from agents.models import AgentDefinition, Event, Thread
from agents.runtime.tools import BLOCKING, ToolContext, ToolRegistry
from agents.runtime.tools import registry as default_registry
from demo import tools as demo_tools
from demo.models import DemoAction
from tests.approvals import state

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


def agent(name: str, tool: str) -> AgentDefinition:
    return AgentDefinition.objects.create(
        name=name,
        model="scripted",
        tools=[tool],
        script=[
            {"tool_calls": [{"name": tool, "input": {"n": 1}}]},
            {"text": "Done."},
        ],
    )


def registry_with(name: str, func: Callable[[dict, ToolContext], Any], **kw: Any) -> ToolRegistry:
    tools = ToolRegistry(dict(default_registry.tools))
    tools.tool(name, description=name, input_schema=SCHEMA, **kw)(func)
    return tools


def run_in_background(engine: Engine, thread_id: Any) -> tuple[threading.Thread, list]:
    """engine.advance in a thread of its own, as a worker would; its outcome lands in `out`."""
    out: list = []

    def target() -> None:
        try:
            out.append(engine.advance(thread_id))
        except BaseException as e:  # handed to the test
            out.append(e)
        finally:
            connection.close()

    runner = threading.Thread(target=target, daemon=True)
    runner.start()
    return runner, out


@pytest.mark.django_db(transaction=True)
class TransientErrorTestCase:
    def test_a_database_error_inside_an_approved_tool_retries_the_step(self, users: Any) -> None:
        calls: list[str] = []

        def pay(args: dict, context: ToolContext) -> str:
            calls.append(context.idempotency_key)
            # The effect happens, then the database fails under the tool: on PostgreSQL a
            # real cancelled statement, elsewhere the error a locked SQLite file raises.
            demo_tools._note(context, "pay", args, "Paid.")
            if len(calls) == 1:
                if connection.vendor == "postgresql":
                    with connection.cursor() as cursor:
                        cursor.execute("SET statement_timeout = 1")
                        try:
                            cursor.execute("SELECT pg_sleep(1)")
                        finally:
                            cursor.execute("SET statement_timeout = 0")
                raise OperationalError("database is locked")
            return "Paid."

        engine = Engine(tools=registry_with("pay", pay, execution_mode=BLOCKING))
        thread = starting.start_thread(agent("payer2", "pay"), "go", users["operator"])
        engine.advance(thread.pk)
        s = thread.suspensions.get()
        decisions.decide(s, users["reviewer"], {"approved": True})

        with pytest.raises(OperationalError):
            engine.advance(thread.pk)  # the task retries on this (agents.tasks.TASK_OPTIONS)
        thread.refresh_from_db()
        assert thread.status == Thread.Status.RUNNING, thread.error
        assert thread.lease_owner == ""  # given back: the retry need not wait for the lease
        assert not Event.objects.filter(thread=thread, type="TOOL_RESULT").exists()

        assert engine.advance(thread.pk) is True
        thread.refresh_from_db()
        assert thread.status == Thread.Status.COMPLETED, thread.error
        # Two attempts under one key; the effect recorded once; one result.
        assert calls == [s.tool_use_id, s.tool_use_id]
        assert DemoAction.objects.filter(idempotency_key=s.tool_use_id).count() == 1
        results = Event.objects.filter(thread=thread, type="TOOL_RESULT")
        assert [(r.payload["content"], r.payload["is_error"]) for r in results] == [
            ("Paid.", False)
        ]


@pytest.mark.django_db(transaction=True)
class SlowToolTestCase:
    def test_a_running_tool_holds_no_lock_a_decision_or_a_cancel_needs(self, users: Any) -> None:
        started, release = threading.Event(), threading.Event()

        def slow(args: dict, context: ToolContext) -> str:
            started.set()
            release.wait(20)  # a bound, so the old behaviour fails instead of hanging
            return "slow done"

        engine = Engine(tools=registry_with("slow", slow))
        thread = starting.start_thread(agent("slowpoke", "slow"), "go", users["operator"])
        other, [s] = state.suspended(users["operator"])
        runner, out = run_in_background(engine, thread.pk)
        assert started.wait(10), "the tool never started"

        decided = decisions.decide(s, users["teammate"], {"approved": False, "reason": "no"})
        asked = cancelling.cancel_thread(thread.pk, users["reviewer"])
        # Both went through while the tool was still running; the run waits for its result.
        assert not release.is_set()
        assert decided.created
        assert asked.status == Thread.Status.CANCELLING

        release.set()
        runner.join(20)
        assert out == [True]
        thread.refresh_from_db()
        assert thread.status == Thread.Status.CANCELLED
        # The result of the tool that finished after the cancel is in the trail, before the end.
        trail = list(thread.events.order_by("id").values_list("type", "payload"))
        ended = ["THREAD_CANCELLING", "TOOL_RESULT", "THREAD_CANCELLED"]
        assert [t for t, _ in trail][-3:] == ended
        assert trail[-2][1]["content"] == "slow done"
        assert trail[-1][1]["tools_unfinished"] == []

    def test_the_heartbeat_keeps_the_lease_while_a_tool_outlasts_it(
        self, users: Any, settings: Any
    ) -> None:
        settings.THREAD_LEASE_SECONDS = 1
        runs: list[str] = []
        started, release = threading.Event(), threading.Event()

        def slow(args: dict, context: ToolContext) -> str:
            runs.append(context.idempotency_key)
            started.set()
            release.wait(20)
            return "slow done"

        engine = Engine(tools=registry_with("slow", slow))
        thread = starting.start_thread(agent("slowpoke", "slow"), "go", users["operator"])
        runner, out = run_in_background(engine, thread.pk)
        assert started.wait(10)
        # Three lease lengths later the first worker still holds the thread: a second
        # delivery of the task finds it taken, and the sweeper leaves it alone.
        threading.Event().wait(3)
        assert Engine(tools=engine.tools).advance(thread.pk) is False
        assert deadlines.requeue_stalled(now=timezone.now()) == 0
        held = Thread.objects.get(pk=thread.pk)
        assert held.lease_expires_at > timezone.now()

        release.set()
        runner.join(20)
        assert out == [True]
        thread.refresh_from_db()
        assert thread.status == Thread.Status.COMPLETED
        assert len(runs) == 1

    def test_a_dead_workers_lease_runs_out_within_seconds(self, users: Any) -> None:
        thread = starting.start_thread(agent("solo", "lookup_account"), "go", users["operator"])
        now = timezone.now()
        # What a worker killed mid-step leaves behind: a lease as long as the setting says,
        # that nobody renews.
        Thread.objects.filter(pk=thread.pk).update(
            lease_owner="dead", lease_expires_at=Lease(timezone.now).until(), runnable_since=now
        )
        assert deadlines.requeue_stalled(now=now + timedelta(seconds=6)) == 0
        assert deadlines.requeue_stalled(now=now + timedelta(seconds=16)) == 1


@pytest.mark.django_db
class IdempotencyKeyTestCase:
    def test_a_demo_tool_started_twice_under_one_key_acts_once(self) -> None:
        context = ToolContext("toolu_same", frame=None, run=None)
        args = {"table": "orders", "count": 3}
        assert demo_tools.delete_records.run(args, context) == "Deleted 3 records from orders."
        assert demo_tools.delete_records.run(args, context) == "Deleted 3 records from orders."
        assert DemoAction.objects.filter(idempotency_key="toolu_same").count() == 1
        other = ToolContext("toolu_other", frame=None, run=None)
        demo_tools.delete_records.run(args, other)
        assert DemoAction.objects.count() == 2


@pytest.mark.django_db(transaction=True)
class TimeLimitTestCase:
    def test_a_tool_past_its_limit_gives_the_model_an_error_and_the_run_goes_on(
        self, users: Any, settings: Any
    ) -> None:
        # The engine runs in this, the main, thread, as a solo worker runs its task.
        settings.TOOL_TIME_LIMIT_SECONDS = 0.5

        def hang(args: dict, context: ToolContext) -> str:
            while True:
                time.sleep(60)

        engine = Engine(tools=registry_with("hang", hang))
        thread = starting.start_thread(agent("stuck", "hang"), "go", users["operator"])
        started = time.monotonic()

        assert engine.advance(thread.pk) is True

        assert 0.5 <= time.monotonic() - started < 5
        thread.refresh_from_db()
        assert thread.status == Thread.Status.COMPLETED
        [result] = Event.objects.filter(thread=thread, type=Event.Type.TOOL_RESULT)
        assert result.payload["is_error"] is True
        assert result.payload["content"] == (
            "Tool hang did not finish within its time limit (0.5 s) and was stopped; it may "
            "have acted before it stopped."
        )
        messages = thread.frames.get().messages
        assert messages[-1]["content"][0]["text"] == "Done."
        assert messages[-2]["content"][0]["is_error"] is True

    def test_an_alarm_armed_around_the_call_is_armed_again_after_it(self) -> None:
        import signal

        from agents.runtime.time_limit import time_limit

        fired: list[int] = []
        previous = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
        try:
            signal.setitimer(signal.ITIMER_REAL, 5)
            with time_limit(1, lambda: AssertionError("not reached")):
                pass
            left, _ = signal.getitimer(signal.ITIMER_REAL)
            assert 4 < left <= 5 and fired == []
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
