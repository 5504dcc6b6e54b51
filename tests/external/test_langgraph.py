"""A LangGraph agent (the real langgraph package, no model needed) asks the gateway before it
pays: the graph stops at interrupt(), the request waits in the reviewer's inbox, the reviewer
decides in the browser, and the graph goes on with the decision; the tool runs once at most."""

import operator
from typing import Annotated, Any, TypedDict

import pytest
from approval_client import Gateway, Rejected, TimedOut
from approval_client.langgraph import pending, require_approval, resume, run
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from playwright.sync_api import expect

from agents.models import Event, Suspension
from tests.conftest import wait_for
from tests.e2e.conftest import Site
from tests.external.conftest import Later, approve_edited, token

AGENT = "billing-graph"
DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
SCHEMA = {
    "type": "object",
    "properties": {"amount": {"type": "integer"}, "to": {"type": "string"}},
    "required": ["amount", "to"],
}


class State(TypedDict):
    invoice: dict[str, Any]
    receipts: Annotated[list[str], operator.add]


def build(gw: Gateway, ran: list[tuple[int, str]], timeout: int = 600, calls: int = 1) -> Any:
    @require_approval(gw, prompt="Pay {amount} to {to}?", schema=SCHEMA, timeout=timeout)
    def pay(amount: int, to: str) -> str:
        """Pays an invoice from the main account."""
        ran.append((amount, to))
        return f"paid {amount} to {to}"

    def pay_invoice(state: State) -> dict[str, Any]:
        receipts = []
        for n in range(calls):
            invoice = state["invoice"]
            try:
                receipts.append(pay(invoice["amount"] + n, invoice["to"]))
            except TimedOut:
                receipts.append("nobody answered")
            except Rejected as e:
                receipts.append(f"not paid: {e.request.reason}")
        return {"receipts": receipts}

    graph = StateGraph(State)
    graph.add_node("pay_invoice", pay_invoice)
    graph.add_edge(START, "pay_invoice")
    graph.add_edge("pay_invoice", END)
    return graph.compile(checkpointer=InMemorySaver())


def card(page: Any, s: Suspension) -> Any:
    return page.locator(f"#s-{s.id}")


class LangGraphTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, site: Site, users: dict[str, Any]) -> None:
        self.site = site
        self.gw = Gateway(site.server.url, token(users["operator"], "runs"), agent=AGENT)
        self.ran: list[tuple[int, str]] = []

    def start(self, thread: str, **options: Any) -> Later:
        graph = build(self.gw, self.ran, **options)
        config = {"configurable": {"thread_id": thread}}
        invoice = {"amount": 120, "to": "ACME"}
        return Later(lambda: run(graph, {"invoice": invoice, "receipts": []}, config, self.gw))

    def waiting(self) -> Suspension:
        return wait_for(
            lambda: Suspension.objects.filter(agent_name=AGENT, status="pending").first(),
            what="the graph's request",
        )

    def test_the_graph_waits_for_the_reviewer_and_pays_the_edited_amount(self) -> None:
        page = self.site.login("reviewer", viewport=DESKTOP)
        graph = self.start("invoice-118")
        s = self.waiting()
        box = card(page, s)
        expect(box).to_be_visible()
        expect(box.locator(".tool")).to_have_text("pay")
        expect(box.locator(".prompt")).to_have_text("Pay 120 to ACME?")
        expect(box).to_contain_text("ACME")
        expect(box).to_contain_text("Pays an invoice from the main account.")
        expect(box).to_contain_text("120")
        assert self.ran == []  # stopped at interrupt(), nothing paid
        self.site.shoot(page, "external-langgraph-inbox-desktop")
        approve_edited(box, {"amount": "90"})
        result = graph.result()
        assert result["receipts"] == ["paid 90 to ACME"]
        assert self.ran == [(90, "ACME")]
        resumed = Event.objects.filter(type=Event.Type.AGENT_RESUMED, suspension_id=s.id)
        assert resumed.count() == 1

    def test_a_rejection_in_the_browser_reaches_the_graph(self) -> None:
        page = self.site.login("reviewer", viewport=PHONE)
        graph = self.start("invoice-119")
        s = self.waiting()
        box = card(page, s)
        expect(box).to_be_visible()
        self.site.shoot(page, "external-langgraph-inbox-phone")
        box.get_by_role("button", name="Reject…").click()
        box.locator("input[name=reason]").fill("already paid")
        box.get_by_role("button", name="Reject", exact=True).click()
        assert graph.result()["receipts"] == ["not paid: already paid"]
        assert self.ran == []

    def test_the_deadline_rejects_and_the_graph_goes_on(self) -> None:
        graph = self.start("invoice-120", timeout=2)
        s = self.waiting()
        assert graph.result(timeout=30)["receipts"] == ["nobody answered"]
        s.refresh_from_db()
        assert s.status == "timed_out" and self.ran == []

    def test_two_approvals_in_one_node_run_each_tool_once(self) -> None:
        """LangGraph runs the node again from its start on each resume: the first payment,
        approved and made before the second interrupt, is not made again."""
        reviewer = self.site.api("reviewer")
        graph = self.start("invoice-121", calls=2)
        for _ in range(2):
            s = self.waiting()
            r = reviewer.post(
                f"/api/threads/{s.thread_id}/suspensions/{s.id}/resume", {"approved": True}
            )
            assert r.status_code == 202, r.text
            wait_for(lambda s=s: not Suspension.objects.filter(pk=s.id, status="pending").exists())
        assert graph.result()["receipts"] == ["paid 120 to ACME", "paid 121 to ACME"]
        assert self.ran == [(120, "ACME"), (121, "ACME")]
        assert Suspension.objects.filter(agent_name=AGENT).count() == 2

    def test_a_paused_graph_is_resumed_once_the_gateway_says_it_is_decided(self) -> None:
        """The webhook way: the graph returns paused, naming its requests; once the gateway
        reports the decision, resume() goes on (here the reviewer decides over the API)."""
        graph = build(self.gw, self.ran)
        config = {"configurable": {"thread_id": "invoice-122"}}
        paused = graph.invoke({"invoice": {"amount": 5, "to": "ACME"}, "receipts": []}, config)
        [(_, request_id)] = pending(paused)
        s = Suspension.objects.get(pk=request_id)
        assert s.tool_input == {"amount": 5, "to": "ACME"} and self.ran == []
        r = self.site.api("reviewer").post(
            f"/api/threads/{s.thread_id}/suspensions/{s.id}/resume", {"approved": True}
        )
        assert r.status_code == 202, r.text
        done = resume(graph, paused, config, self.gw)
        assert done["receipts"] == ["paid 5 to ACME"] and self.ran == [(5, "ACME")]
        assert pending(done) == []
