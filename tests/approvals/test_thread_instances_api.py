"""GET /api/threads/{id}: the thread's instances, its token usage and its live text."""

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import AgentDefinition, LiveText, StackFrame, Suspension, Thread
from approvals.api.payloads import thread_payload


def frame(thread: Thread, **fields: Any) -> StackFrame:
    fields.setdefault("agent_name", "boss")
    return StackFrame.objects.create(thread=thread, model="scripted", **fields)


def instance(thread: Thread, parent: StackFrame, index: int, **fields: Any) -> StackFrame:
    """An agents-as-tools instance: its lane is itself."""
    made = frame(
        thread,
        parent=parent,
        depth=parent.depth + 1,
        agent_type=StackFrame.Type.AGENT,
        instance=index,
        parent_tool_use_id=f"toolu_{index}",
        **fields,
    )
    made.lane = made
    made.save(update_fields=["lane"])
    return made


class ThreadInstancesTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, api: Any, db: Any) -> None:
        self.api = api("reviewer")
        agent = AgentDefinition.objects.create(name="boss", agents_as_tools=["research"])
        self.thread = Thread.objects.create(agent=agent)
        self.main = frame(self.thread, input_tokens=1000, output_tokens=100)
        started = timezone.now() - timedelta(seconds=30)
        self.done = instance(
            self.thread,
            self.main,
            1,
            agent_name="research",
            status=StackFrame.Status.COMPLETED,
            tools_used=["lookup_account", "search"],
            input_tokens=300,
            output_tokens=40,
        )
        self.waiting = instance(
            self.thread, self.main, 2, agent_name="research", input_tokens=200, output_tokens=20
        )
        self.running = instance(self.thread, self.main, 3, agent_name="writer")
        self.failed = instance(
            self.thread, self.main, 4, agent_name="writer", status=StackFrame.Status.FAILED
        )
        StackFrame.objects.filter(pk=self.done.pk).update(
            created_at=started, finished_at=started + timedelta(milliseconds=2500)
        )
        # A sub-agent the waiting instance pushed: its frames share the instance's lane.
        self.skill = frame(
            self.thread,
            parent=self.waiting,
            depth=2,
            agent_name="helper",
            agent_type=StackFrame.Type.SKILL,
            lane=self.waiting,
            input_tokens=50,
            output_tokens=5,
        )
        self.pending = Suspension.objects.create(
            thread=self.thread,
            frame=self.skill,
            group=uuid.uuid4(),
            agent_name="helper",
            tool_use_id="toolu_x",
            tool_name="displayConfirmation",
        )

    def get(self) -> dict[str, Any]:
        r = self.api.get(f"/api/threads/{self.thread.pk}")
        assert r.status_code == 200
        return r.json()

    def test_it_lists_every_instance_oldest_first_with_its_status(self) -> None:
        got = self.get()["instances"]
        assert [(i["name"], i["status"]) for i in got] == [
            ("research[1]", "done"),
            ("research[2]", "waiting for approval"),
            ("writer[3]", "running"),
            ("writer[4]", "failed"),
        ]
        done = got[0]
        assert done == {
            "id": self.done.pk,
            "name": "research[1]",
            "agent": "research",
            "index": 1,
            "status": "done",
            "started_at": done["started_at"],
            "finished_at": done["finished_at"],
            "duration_ms": 2500,
            "tools": ["lookup_account", "search"],
            "input_tokens": 300,
            "output_tokens": 40,
            "parent_frame_id": self.main.pk,
            "tool_use_id": "toolu_1",
            "pending_suspensions": [],
        }
        assert got[1]["pending_suspensions"] == [str(self.pending.pk)]
        assert got[1]["duration_ms"] is None and got[1]["finished_at"] is None

    def test_a_decided_suspension_leaves_the_instance_running(self) -> None:
        Suspension.objects.filter(pk=self.pending.pk).update(status=Suspension.Status.APPROVED)
        assert self.get()["instances"][1]["status"] == "running"

    def test_usage_is_summed_over_every_frame_per_agent(self) -> None:
        assert self.get()["usage"] == {
            "input_tokens": 1550,
            "output_tokens": 165,
            "by_agent": {
                "boss": {"input_tokens": 1000, "output_tokens": 100},
                "helper": {"input_tokens": 50, "output_tokens": 5},
                "research": {"input_tokens": 500, "output_tokens": 60},
                "writer": {"input_tokens": 0, "output_tokens": 0},
            },
        }

    def test_it_shows_what_is_being_written(self) -> None:
        LiveText.objects.create(
            frame=self.running, thread=self.thread, text="Drafting", activity="", seq=4
        )
        LiveText.objects.create(
            frame=self.main, thread=self.thread, text="", activity="waiting for approval", seq=9
        )
        assert self.get()["live"] == [
            {
                "frame_id": self.main.pk,
                "frame": "boss",
                "lane": None,
                "text": "",
                "activity": "waiting for approval",
                "seq": 9,
            },
            {
                "frame_id": self.running.pk,
                "frame": "agent:writer[3]",
                "lane": self.running.pk,
                "text": "Drafting",
                "activity": "",
                "seq": 4,
            },
        ]

    def test_the_queries_do_not_grow_with_the_frames(self) -> None:
        thread = Thread.objects.get(pk=self.thread.pk)
        with CaptureQueriesContext(connection) as few:
            thread_payload(thread)
        for n in range(5, 25):
            instance(self.thread, self.main, n, agent_name=f"agent{n}", input_tokens=n)
        thread = Thread.objects.get(pk=self.thread.pk)
        with CaptureQueriesContext(connection) as many:
            payload = thread_payload(thread)
        assert len(many) == len(few)
        assert len(payload["instances"]) == 24

    def test_a_thread_without_instances_has_none(self) -> None:
        thread = Thread.objects.create(agent=self.thread.agent)
        frame(thread)
        r = self.api.get(f"/api/threads/{thread.pk}")
        body = r.json()
        assert body["instances"] == [] and body["live"] == []
        assert body["usage"] == {
            "input_tokens": 0,
            "output_tokens": 0,
            "by_agent": {"boss": {"input_tokens": 0, "output_tokens": 0}},
        }
