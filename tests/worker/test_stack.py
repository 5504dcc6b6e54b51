"""Sub-agents through a real worker: the durable stack of frames of
seeds/interactive-agents-stack.md, one test per row of its Behaviors and Errors tables, then
suspensions at depth 3, a worker restart mid-conversation and cancel."""

from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from agents.models import Event, StackFrame, Suspension, Thread
from tests.conftest import ROOT, operator_of, wait_for

pytestmark = pytest.mark.worker

SETTLED = ("waiting_input", "suspended", "completed", "failed", "cancelled")


def chain(main: str, middle: str, inner: str) -> str:
    """A main agent that hands its task to the skill `middle`, which calls the agent `inner`."""
    return f"""
  - name: {main}
    model: scripted
    sub_agents: [{middle}]
    script:
      - tool_calls:
          - {{name: use_skill, input: {{name: {middle}, message: Do the task.}}}}
      - text: {main} is done.
        if_error:
          text: {main} saw {middle} fail.
  - name: {middle}
    model: scripted
    sub_agents: [{inner}]
    script:
      - tool_calls:
          - {{name: use_agent, input: {{name: {inner}, message: Do your part.}}}}
      - tool_calls:
          - {{name: complete, input: {{result: "{inner} did its part."}}}}
        if_error:
          tool_calls:
            - {{name: complete, input: {{result: "{middle} saw {inner} fail."}}}}
"""


AGENTS = (
    """
agents:
  - name: chief
    model: scripted
    sub_agents: [writer]
    script:
      - text: Handing over to the writer.
        tool_calls:
          - {name: use_skill, input: {name: writer, message: Draft the release notes.}}
      - text: Chief is done.
        if_error:
          text: Chief saw the writer fail.
  - name: writer
    model: scripted
    sub_agents: [research]
    script:
      - text: Who are the notes for?
      - tool_calls:
          - {name: use_agent, input: {name: research, message: Publish the notes.}}
      - text: Research answered. Anything else?
      - tool_calls:
          - {name: complete, input: {result: Draft ready.}}
  - name: research
    model: scripted
    tools: [displayConfirmation]
    script:
      - text: Which version?
      - text: Publishing needs approval.
        tool_calls:
          - {name: displayConfirmation, input: {action: Publish the notes}}
      - tool_calls:
          - {name: complete, input: {result: Notes published.}}
        if_error:
          tool_calls:
            - {name: complete, input: {result: Notes not published.}}

  - name: handoff
    model: scripted
    sub_agents: [summary]
    script:
      - tool_calls:
          - {name: use_skill, input: {name: summary, message: Summarise the week.}}
      - text: Handoff is done.
  - name: summary
    model: scripted
    script:
      - tool_calls:
          - {name: complete, input: {result: Summary ready.}}

  - name: planner
    model: scripted
    tools: [lookup_account]
    sub_agents: [summary, counter]
    script:
      - tool_calls:
          - {name: use_skill, input: {name: summary, message: Summarise.}}
      - text: Now a lookup.
        tool_calls:
          - {name: lookup_account, input: {account: ACC-1}}
      - tool_calls:
          - {name: use_agent, input: {name: counter, message: Count them.}}
      - text: Planner is done.
  - name: counter
    model: scripted
    script:
      - tool_calls:
          - {name: complete, input: {result: Counted 3.}}

  - name: spinner_host
    model: scripted
    sub_agents: [spinner]
    script:
      - tool_calls:
          - {name: use_skill, input: {name: spinner, message: Look everything up.}}
      - text: Spinner finished.
        if_error:
          text: Spinner gave up.
  - name: spinner
    model: scripted
    tools: [lookup_account]
    max_iterations: 2
    script:
      - tool_calls:
          - {name: lookup_account, input: {account: A-1}}
      - tool_calls:
          - {name: lookup_account, input: {account: A-2}}
      - tool_calls:
          - {name: lookup_account, input: {account: A-3}}

  - name: fragile
    model: scripted
    sub_agents: [flaky]
    script:
      - tool_calls:
          - {name: use_skill, input: {name: flaky, message: Try.}}
      - text: Flaky finished.
        if_error:
          text: Flaky broke.
  - name: flaky
    model: scripted
    script:
      - error: The model is overloaded.

  - name: audit_host
    model: scripted
    sub_agents: [auditor]
    script:
      - tool_calls:
          - {name: use_skill, input: {name: auditor, message: Audit closed-9.}}
      - text: Audit host is done.
  - name: auditor
    model: scripted
    tools: [lookup_account]
    script:
      - tool_calls:
          - {name: lookup_account, input: {account: closed-9}}
      - text: The account is fine.
        if_error:
          text: That account is closed. Which one should I audit instead?

  - name: sneaky
    model: scripted
    sub_agents: [summary]
    script:
      - tool_calls:
          - {name: use_agent, input: {name: solo, message: Do it for me.}}
      - text: Solo helped.
        if_error:
          text: Solo is not mine to call.

  - name: solo
    model: scripted
    tools: [lookup_account]
    script:
      - tool_calls:
          - {name: lookup_account, input: {account: ACC-7}}
      - text: Solo is done.

  - name: editor
    model: scripted
    sub_agents: [interviewer]
    script:
      - tool_calls:
          - {name: use_skill, input: {name: interviewer, message: Get the title and the date.}}
      - text: Editor is done.
  - name: interviewer
    model: scripted
    script:
      - text: What is the title?
      - text: And the date?
      - tool_calls:
          - {name: complete, input: {result: Title and date noted.}}
"""
    + chain("deep_spin", "mid_spin", "spinner")
    + chain("deep_flaky", "mid_flaky", "flaky")
)


class Conversation:
    """Drives one thread through the API as the reviewer alice."""

    def __init__(self, api: Any, agent: str) -> None:
        self.api = api
        r = operator_of(api).post("/api/threads", {"agent": agent, "message": "go"})
        assert r.status_code == 201, r.content
        self.id = r.json()["id"]

    def settle(self, status: str) -> Thread:
        def settled() -> Thread | None:
            thread = Thread.objects.get(pk=self.id)
            return thread if thread.status in SETTLED else None

        try:
            thread = wait_for(settled, timeout=20, what=f"thread {self.id} to settle")
        except AssertionError as e:
            now = Thread.objects.get(pk=self.id)
            last = Event.objects.filter(thread_id=self.id).order_by("-id").first()
            raise AssertionError(
                f"{e}: it is {now.status}, runnable since {now.runnable_since}, lease "
                f"{now.lease_owner or 'free'} until {now.lease_expires_at}, last event {last}"
            ) from e
        assert thread.status == status, (thread.status, thread.error)
        return thread

    def say(self, text: str, then: str) -> Thread:
        r = self.api.post(f"/api/threads/{self.id}/messages", {"text": text})
        assert r.status_code == 202, r.content
        return self.settle(then)

    def decide(self, decision: dict[str, Any], then: str) -> Thread:
        [s] = self.pending()
        r = self.api.post(f"/api/threads/{self.id}/suspensions/{s.id}/resume", decision)
        assert r.status_code == 202, r.content
        return self.settle(then)

    def pending(self) -> list[Suspension]:
        return list(Suspension.objects.filter(thread_id=self.id, status="pending"))

    def stack(self) -> list[str]:
        r = self.api.get(f"/api/threads/{self.id}")
        assert r.status_code == 200
        return [f["label"] for f in r.json()["stack"]]

    def events(self, type: str) -> list[dict[str, Any]]:
        return [
            e.payload for e in Event.objects.filter(thread_id=self.id, type=type).order_by("id")
        ]

    def frame(self, agent: str) -> StackFrame:
        return StackFrame.objects.get(thread_id=self.id, agent_name=agent)

    def said(self) -> list[tuple[str, str]]:
        return [(e["frame"], e["text"]) for e in self.events("AGENT_MESSAGE")]


def results_in(frame: StackFrame) -> list[tuple[str, bool]]:
    """The tool_results a frame's model received, in order."""
    return [
        (b["content"], bool(b.get("is_error")))
        for m in frame.messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


def texts_in(frame: StackFrame) -> list[str]:
    """What the user said to a frame, in order."""
    return [
        b["text"]
        for m in frame.messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "text"
    ]


def crumbs(payload: dict[str, Any]) -> list[str]:
    return [f["label"] for f in payload["stack"]]


class StackTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, worker: Any, api: Any, load_agents: Any) -> None:
        load_agents(AGENTS)
        self.api = api("reviewer")
        self.worker = worker

    def talk(self, agent: str) -> Conversation:
        return Conversation(self.api, agent)

    def to_depth_3(self) -> Conversation:
        """chief → skill:writer → agent:research, waiting for the user's answer."""
        c = self.talk("chief")
        c.settle("waiting_input")
        c.say("For customers.", then="waiting_input")
        return c

    # Behaviors -----------------------------------------------------------------------------

    def test_a_skill_that_completes_on_its_first_turn_is_pushed_popped_and_cascades(self) -> None:
        c = self.talk("handoff")
        thread = c.settle("completed")
        assert thread.result == "Handoff is done."
        [pushed] = c.events("FRAME_PUSHED")
        [popped] = c.events("FRAME_POPPED")
        assert pushed["frame"] == "skill:summary" and crumbs(pushed) == ["handoff", "skill:summary"]
        assert popped["result"] == "Summary ready." and popped["is_error"] is False
        assert crumbs(popped) == ["handoff"]
        assert not c.events("THREAD_WAITING")
        assert results_in(c.frame("handoff")) == [("Summary ready.", False)]
        assert c.frame("summary").status == "completed"
        assert c.frame("summary").parent_tool_use_id == pushed["parent_tool_use_id"]
        # The call's own transaction rolled back when the child was pushed; what the model
        # said and asked for was saved with the push.
        called = [(e["tool"], e["frame"]) for e in c.events("TOOL_CALLED")]
        assert called == [("use_skill", "handoff"), ("complete", "skill:summary")]
        assert c.events("TOOL_CALLED")[0]["tool_use_id"] == pushed["parent_tool_use_id"]

    def test_a_skill_that_needs_interaction_talks_with_the_user_at_depth_2(self) -> None:
        c = self.talk("chief")
        c.settle("waiting_input")
        assert c.stack() == ["chief", "skill:writer"]
        [waiting] = c.events("THREAD_WAITING")
        assert waiting["frame"] == "skill:writer" and waiting["text"] == "Who are the notes for?"
        assert c.said()[-1] == ("skill:writer", "Who are the notes for?")
        # The main agent's call waits for the skill: no result yet.
        assert results_in(c.frame("chief")) == []

    def test_a_skill_calling_an_agent_puts_the_user_in_touch_with_it_at_depth_3(self) -> None:
        c = self.to_depth_3()
        assert c.stack() == ["chief", "skill:writer", "agent:research"]
        pushed = c.events("FRAME_PUSHED")
        assert [p["frame"] for p in pushed] == ["skill:writer", "agent:research"]
        assert crumbs(pushed[-1]) == ["chief", "skill:writer", "agent:research"]
        assert (
            pushed[-1]["from"] == "skill:writer" and pushed[-1]["message"] == "Publish the notes."
        )
        assert c.said()[-1] == ("agent:research", "Which version?")

    def test_an_inner_agent_that_completes_cascades_to_the_skill_which_continues(self) -> None:
        c = self.to_depth_3()
        c.say("Version 2.0.", then="suspended")
        c.decide({"approved": True}, then="waiting_input")
        assert c.stack() == ["chief", "skill:writer"]
        assert results_in(c.frame("writer")) == [("Notes published.", False)]
        assert c.said()[-1] == ("skill:writer", "Research answered. Anything else?")
        popped = c.events("FRAME_POPPED")[-1]
        assert popped["frame"] == "agent:research" and popped["to"] == "skill:writer"
        assert crumbs(popped) == ["chief", "skill:writer"]

    def test_the_iteration_limit_of_a_skill_cascades_as_an_error_result(self) -> None:
        c = self.talk("spinner_host")
        thread = c.settle("completed")
        assert thread.result == "Spinner gave up."
        [(content, is_error)] = results_in(c.frame("spinner_host"))
        assert is_error
        assert content == (
            "The skill 'spinner' failed and was closed: Agent 'spinner' stopped: it reached its "
            "limit of 2 model calls without finishing."
        )
        assert c.frame("spinner").status == "failed"
        [popped] = c.events("FRAME_POPPED")
        assert popped["is_error"] is True and crumbs(popped) == ["spinner_host"]

    def test_the_main_agent_resumes_calls_tools_spawns_another_child_and_answers(self) -> None:
        c = self.talk("planner")
        thread = c.settle("completed")
        assert thread.result == "Planner is done."
        assert [p["frame"] for p in c.events("FRAME_PUSHED")] == ["skill:summary", "agent:counter"]
        results = results_in(c.frame("planner"))
        assert results[0] == ("Summary ready.", False)
        assert '"account": "ACC-1"' in results[1][0] and not results[1][1]
        assert results[2] == ("Counted 3.", False)
        assert c.frame("planner").iteration == 4  # its model was called again after each child

    def test_with_no_sub_agent_on_the_stack_the_main_agent_runs_as_usual(self) -> None:
        c = self.talk("solo")
        thread = c.settle("completed")
        assert thread.result == "Solo is done."
        assert c.frame("solo").tools == ["lookup_account"]  # no use_skill/use_agent to offer
        assert not c.events("FRAME_PUSHED")
        r = self.api.post(f"/api/threads/{c.id}/messages", {"text": "more?"})
        assert r.status_code == 409 and r.json()["error"] == "not_waiting_for_input"

    def test_a_message_goes_to_the_top_of_the_stack(self) -> None:
        c = self.to_depth_3()
        c.say("Version 2.0.", then="suspended")
        [message] = [m for m in c.events("USER_MESSAGE") if m["text"] == "Version 2.0."]
        assert message["frame"] == "agent:research" and message["depth"] == 2
        assert texts_in(c.frame("research"))[-1] == "Version 2.0."
        assert "Version 2.0." not in texts_in(c.frame("writer"))
        assert "Version 2.0." not in texts_in(c.frame("chief"))
        assert c.said()[-1] == ("agent:research", "Publishing needs approval.")

    def test_an_llm_error_in_a_skill_cascades_to_the_parent(self) -> None:
        c = self.talk("fragile")
        thread = c.settle("completed")
        assert thread.result == "Flaky broke."
        assert results_in(c.frame("fragile")) == [
            ("The skill 'flaky' failed and was closed: The model is overloaded.", True)
        ]
        assert c.frame("flaky").status == "failed"

    def test_an_agent_that_is_not_a_sub_agent_is_refused_and_the_model_decides(self) -> None:
        c = self.talk("sneaky")
        thread = c.settle("completed")
        assert thread.result == "Solo is not mine to call."
        [(content, is_error)] = results_in(c.frame("sneaky"))
        assert is_error and content == (
            "'solo' is not a sub-agent of 'sneaky' (its sub-agents: summary)."
        )
        assert not c.events("FRAME_PUSHED")

    # Errors --------------------------------------------------------------------------------

    def test_an_inner_agent_over_its_iteration_limit_fails_into_the_skill_only(self) -> None:
        c = self.talk("deep_spin")
        thread = c.settle("completed")
        assert thread.result == "deep_spin is done."
        [(content, is_error)] = results_in(c.frame("mid_spin"))
        assert is_error and content.startswith("The agent 'spinner' failed and was closed: ")
        assert "limit of 2 model calls" in content
        assert results_in(c.frame("deep_spin")) == [("mid_spin saw spinner fail.", False)]

    def test_an_llm_error_in_an_inner_agent_fails_into_the_skill_only(self) -> None:
        c = self.talk("deep_flaky")
        thread = c.settle("completed")
        assert thread.result == "deep_flaky is done."
        assert results_in(c.frame("mid_flaky")) == [
            ("The agent 'flaky' failed and was closed: The model is overloaded.", True)
        ]
        assert results_in(c.frame("deep_flaky")) == [("mid_flaky saw flaky fail.", False)]
        popped = c.events("FRAME_POPPED")
        assert [(p["frame"], p["is_error"]) for p in popped] == [
            ("agent:flaky", True),
            ("skill:mid_flaky", False),
        ]

    def test_a_tool_error_in_a_sub_agent_goes_to_its_model_which_decides(self) -> None:
        c = self.talk("audit_host")
        c.settle("waiting_input")
        assert c.stack() == ["audit_host", "skill:auditor"]
        assert results_in(c.frame("auditor")) == [("Account closed-9 is closed.", True)]
        assert c.said()[-1] == (
            "skill:auditor",
            "That account is closed. Which one should I audit instead?",
        )
        assert not c.events("FRAME_POPPED")

    def test_an_unexpectedly_empty_stack_is_logged_and_fails_the_thread(self, users: Any) -> None:
        from agents import tasks
        from agents.models import AgentDefinition

        thread = Thread.objects.create(
            agent=AgentDefinition.objects.get(name="chief"),
            status=Thread.Status.RUNNING,
            runnable_since=timezone.now(),
        )
        tasks.resume_thread.delay(str(thread.pk))
        thread = wait_for(
            lambda: Thread.objects.filter(pk=thread.pk, status="failed").first(),
            what="the thread with no stack to fail",
        )
        assert thread.error == "The agent stack was empty."
        assert Event.objects.filter(thread=thread, type="THREAD_FAILED").count() == 1
        assert f"thread {thread.pk} is running with an empty stack" in self.worker_log()

    def test_a_sub_agent_ending_with_no_frame_below_it_is_logged_and_ends_the_thread(self) -> None:
        thread, task = self.broken_stack(with_main=False, parent_tool_use_id="toolu_gone")
        thread = wait_for(
            lambda: Thread.objects.filter(pk=thread.pk, status="completed").first(),
            what="the orphaned sub-agent's thread to end",
        )
        assert thread.result == "Summary ready."
        wait_for(lambda: f"resume_thread[{task}] succeeded" in self.worker_log(), what="the task")
        log = self.worker_log()
        assert f"thread {thread.pk}: skill:summary ended with no frame below it" in log
        # The loop stopped there: it did not go on to find the stack empty.
        assert f"thread {thread.pk} is running with an empty stack" not in log

    def test_a_complete_without_parent_tool_use_id_fails_as_a_programming_error(self) -> None:
        thread, _ = self.broken_stack(with_main=True, parent_tool_use_id="")
        thread = wait_for(
            lambda: Thread.objects.filter(pk=thread.pk, status="failed").first(),
            what="the thread to fail",
        )
        assert thread.error == (
            "Internal error: skill frame 'summary' finished without a parent_tool_use_id"
        )
        assert not thread.frames.filter(status="active").exists()
        assert "finished without a parent_tool_use_id" in self.worker_log()

    def broken_stack(self, with_main: bool, parent_tool_use_id: str) -> tuple[Thread, str]:
        """A stack no engine would build, so the guards of the orchestration loop show."""
        from agents import tasks
        from agents.models import AgentDefinition

        thread = Thread.objects.create(
            agent=AgentDefinition.objects.get(name="handoff"),
            status=Thread.Status.RUNNING,
            runnable_since=timezone.now(),
        )
        parent = None
        if with_main:
            call = {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "use_skill",
                "input": {"name": "summary", "message": "Summarise."},
            }
            parent = StackFrame.objects.create(
                thread=thread,
                depth=0,
                agent_name="handoff",
                agent_type="main",
                model="scripted",
                tools=["use_skill", "use_agent"],
                messages=[
                    {"role": "user", "content": [{"type": "text", "text": "go"}]},
                    {"role": "assistant", "content": [call]},
                ],
            )
        StackFrame.objects.create(
            thread=thread,
            parent=parent,
            depth=1,
            agent_name="summary",
            agent_type="skill",
            model="scripted",
            parent_tool_use_id=parent_tool_use_id,
            messages=[{"role": "user", "content": [{"type": "text", "text": "Summarise."}]}],
        )
        return thread, tasks.resume_thread.delay(str(thread.pk)).id

    def worker_log(self) -> str:
        return Path(self.worker.log).read_text()

    # Suspensions at depth 3 ---------------------------------------------------------------

    def test_a_suspension_at_depth_3_shows_its_lineage_and_approval_cascades_to_main(self) -> None:
        c = self.to_depth_3()
        c.say("Version 2.0.", then="suspended")
        detail = self.api.get(f"/api/threads/{c.id}").json()
        assert [f["label"] for f in detail["stack"]] == ["chief", "skill:writer", "agent:research"]
        [s] = detail["pending_suspensions"]
        assert s["lineage"] == "main → skill:writer → agent:research"
        assert s["agent"] == "research" and s["prompt"] == "Publishing needs approval."
        one = self.api.get(f"/api/suspensions/{s['id']}").json()
        assert one["lineage"] == "main → skill:writer → agent:research"

        c.decide({"approved": True, "reason": "go ahead"}, then="waiting_input")
        [resumed] = c.events("AGENT_RESUMED")
        assert resumed["frame"] == "agent:research" and resumed["approved"] is True
        [(decision, is_error)] = results_in(c.frame("research"))
        assert not is_error and '"approved": true' in decision and "alice" in decision
        assert results_in(c.frame("writer")) == [("Notes published.", False)]

        thread = c.say("Nothing else.", then="completed")
        assert thread.result == "Chief is done."
        assert results_in(c.frame("chief")) == [("Draft ready.", False)]
        popped = [(p["frame"], p["to"], p["result"]) for p in c.events("FRAME_POPPED")]
        assert popped == [
            ("agent:research", "skill:writer", "Notes published."),
            ("skill:writer", "chief", "Draft ready."),
        ]
        assert [f.status for f in StackFrame.objects.filter(thread_id=c.id)] == ["completed"] * 3

    def test_a_rejection_at_depth_3_reaches_the_inner_agent_and_its_result_cascades(self) -> None:
        c = self.to_depth_3()
        c.say("Version 2.0.", then="suspended")
        c.decide({"approved": False, "reason": "not before Monday"}, then="waiting_input")
        [(rejection, is_error)] = results_in(c.frame("research"))
        assert is_error and "Rejected by alice: not before Monday" in rejection
        assert results_in(c.frame("writer")) == [("Notes not published.", False)]
        thread = c.say("Nothing else.", then="completed")
        assert thread.result == "Chief is done."
        assert results_in(c.frame("chief")) == [("Draft ready.", False)]
        s = Suspension.objects.get(thread_id=c.id)
        assert s.status == "rejected" and s.decided_by.username == "alice"

    # Durability and cancel -----------------------------------------------------------------

    def test_a_worker_restart_between_two_messages_at_depth_2_loses_nothing(self) -> None:
        c = self.talk("editor")
        c.settle("waiting_input")
        c.say("Launch day", then="waiting_input")
        assert c.said()[-1] == ("skill:interviewer", "And the date?")

        self.worker.restart()

        thread = c.say("Monday", then="completed")
        assert thread.result == "Editor is done."
        assert texts_in(c.frame("interviewer")) == [
            "Get the title and the date.",
            "Launch day",
            "Monday",
        ]
        assert c.said() == [
            ("skill:interviewer", "What is the title?"),
            ("skill:interviewer", "And the date?"),
            ("editor", "Editor is done."),
        ]
        assert results_in(c.frame("editor")) == [("Title and date noted.", False)]

    def test_cancel_at_depth_3_unwinds_the_stack_and_says_who_cancelled(self) -> None:
        c = self.to_depth_3()
        c.say("Version 2.0.", then="suspended")
        [s] = c.pending()
        r = self.api.post(f"/api/threads/{c.id}/cancel")
        assert r.status_code == 200, r.content
        assert r.json()["status"] == "cancelled" and r.json()["stack"] == []
        assert not Suspension.objects.filter(thread_id=c.id, status="pending").exists()
        s.refresh_from_db()
        assert s.status == "cancelled" and s.decided_by.username == "alice"
        [cancelled] = Event.objects.filter(thread_id=c.id, type="SUSPENSION_CANCELLED")
        assert cancelled.actor.username == "alice" and cancelled.payload["decided_by"] == "alice"
        [ended] = Event.objects.filter(thread_id=c.id, type="THREAD_CANCELLED")
        assert ended.actor.username == "alice" and ended.payload["cancelled_by"] == "alice"
        assert ended.payload["frames_cancelled"] == ["chief", "skill:writer", "agent:research"]
        statuses = list(StackFrame.objects.filter(thread_id=c.id).values_list("status", flat=True))
        assert statuses == ["cancelled"] * 3
        late = self.api.post(f"/api/threads/{c.id}/suspensions/{s.id}/resume", {"approved": True})
        assert late.status_code == 409
        assert Thread.objects.get(pk=c.id).status == "cancelled"


class DemoStackTestCase:
    def test_the_demo_publisher_hands_over_to_the_writer_whose_research_needs_approval(
        self, worker: Any, api: Any
    ) -> None:
        from agents.agentfiles import load

        load([ROOT / "demo" / "agents.yaml"])
        c = Conversation(api("reviewer"), "publisher")
        c.settle("waiting_input")
        assert c.stack() == ["publisher", "skill:writer"]
        c.say("For customers.", then="suspended")
        [s] = c.pending()
        assert s.lineage == "main → skill:writer → agent:research"
        thread = c.decide({"approved": True}, then="completed")
        assert thread.result == "The writer finished the 2.0 announcement."
