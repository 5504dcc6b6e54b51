"""The thread page with agents called as tools: instance lines, folded chat, usage, live text."""

import re
from typing import Any

import pytest
from django.test import Client

from agents.models import AgentDefinition, Event, StackFrame, Thread


class ThreadPageInstancesTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], db: Any) -> None:
        self.client = Client()
        self.client.force_login(users["reviewer"])
        agent = AgentDefinition.objects.create(name="boss", agents_as_tools=["research"])
        self.thread = Thread.objects.create(agent=agent, status=Thread.Status.RUNNING)
        self.main = StackFrame.objects.create(
            thread=self.thread, agent_name="boss", model="scripted", input_tokens=70
        )
        self.research = StackFrame.objects.create(
            thread=self.thread,
            parent=self.main,
            depth=1,
            agent_name="research",
            agent_type=StackFrame.Type.AGENT,
            instance=1,
            parent_tool_use_id="toolu_1",
            model="scripted",
            tools_used=["lookup_account"],
            input_tokens=30,
            output_tokens=5,
        )
        self.research.lane = self.research
        self.research.save(update_fields=["lane"])
        main = {"agent": "boss", "frame": "boss", "frame_id": self.main.pk, "depth": 0}
        lane = {
            "agent": "research",
            "frame": "agent:research[1]",
            "frame_id": self.research.pk,
            "depth": 1,
            "lane": self.research.pk,
            "instance": "research[1]",
        }
        self.events = {
            name: Event.objects.create(thread=self.thread, type=type, payload=payload)
            for name, type, payload in [
                ("started", "THREAD_STARTED", {"agent": "boss", "message": "go"}),
                ("calls", "TOOL_CALLED", {"tool": "agent__research", "input": {}, **main}),
                (
                    "instance",
                    "INSTANCE_STARTED",
                    {
                        "instance": "research[1]",
                        "frame_id": self.research.pk,
                        "agent": "research",
                        "index": 1,
                        "parent_frame_id": self.main.pk,
                        "parent_frame": "boss",
                        "tool_use_id": "toolu_1",
                        "started_at": self.research.created_at.isoformat(),
                        "lane": None,
                    },
                ),
                ("said", "AGENT_MESSAGE", {"text": "Looking <b>it</b> up", **lane}),
                ("pushed", "FRAME_PUSHED", {"frame": "skill:helper", **lane}),
                ("popped", "FRAME_POPPED", {"frame": "skill:helper", "to": "research", **lane}),
                (
                    "finished",
                    "INSTANCE_FINISHED",
                    {
                        "instance": "research[1]",
                        "frame_id": self.research.pk,
                        "status": "done",
                        "duration_ms": 2400,
                        "tools": ["lookup_account"],
                        "result": "Found it.",
                        "is_error": False,
                        "lane": self.research.pk,
                    },
                ),
            ]
        }

    def page(self) -> str:
        r = self.client.get(f"/threads/{self.thread.pk}/")
        assert r.status_code == 200
        return r.content.decode()

    def test_an_instances_own_chat_is_marked_to_fold_under_its_start(self) -> None:
        html = self.page()
        started = self.events["instance"].id
        assert re.search(rf'data-event="{started}" data-instance="{self.research.pk}">', html), (
            "the INSTANCE_STARTED line names its instance"
        )
        for name in ("said", "pushed", "popped"):
            assert f'data-event="{self.events[name].id}" data-lane="{self.research.pk}"' in html
        for name in ("calls", "finished"):
            assert f'data-event="{self.events[name].id}">' in html  # stays in the transcript
        assert "started research[1]" in html
        assert "done in 2.4 s" in html and "Found it." in html
        assert "Looking &lt;b&gt;it&lt;/b&gt; up" in html  # still text (invariant 6)

    def test_an_instances_frames_stay_off_the_main_stack(self) -> None:
        assert '<ol id="stack"><li>boss</li></ol>' in self.page()

    def test_the_page_starts_with_the_instances_and_the_usage(self) -> None:
        # Rendered by the server, as the page's fragment renders them live (approvals.fragments).
        html = self.page()
        [line] = re.findall(r'<li class="instance" data-frame="(\d+)"[^>]*>(.*?)</li>', html)
        assert line[0] == str(self.research.pk)
        assert '<span class="name">research[1]</span> <span class="state">running</span>' in line[1]
        assert '<span class="tools">used lookup_account</span>' in line[1]
        assert 'id="batch" aria-labelledby="batch-title">' in html  # shown
        usage = html[html.index('id="usage"') :]
        assert '<span class="split">100 in · 5 out</span>' in usage  # input_tokens 100
        assert 'data-agent="research" title="30 in · 5 out">research 35</li>' in usage

    def test_it_loads_its_styles_and_the_live_parts(self) -> None:
        html = self.page()
        assert "/static/css/thread.css" in html
        for part in ('id="batch"', 'id="instances"', 'id="usage"', 'id="live-text"'):
            assert part in html
        assert "<style" not in html and " style=" not in html  # the CSP allows no inline style
