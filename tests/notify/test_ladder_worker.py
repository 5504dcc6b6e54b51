"""The ladder through a real Celery worker and beat: reminders and the escalation at their
times, the deadline still applied within a second, and the emails they call for sent by the
worker with Django's SMTP backend to the test's SMTP server."""

import re
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client

from agents.models import Event, Suspension, Thread
from notify.models import Email, EmailOptIn
from tests.conftest import wait_for
from tests.notify.raised import emailed, leads

pytestmark = pytest.mark.worker

# Two seconds between steps: a sweep every second lands in each window whatever its phase.
HASTY = """
agents:
  - name: hasty
    model: scripted
    tools: [transfer_funds]
    tool_overrides:
      transfer_funds: {timeout: 6, reminders: [4s, 2s], escalate_to: leads, escalate_at: 2}
    script:
      - text: Two payments, quickly.
        tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 200}}
          - {name: transfer_funds, input: {from_account: A-1, to_account: C-3, amount: 300}}
      - text: Went on after the deadline.
        if_error:
          text: Went on after the deadline.
"""
LADDER = ["SUSPENSION_REMINDER", "SUSPENSION_ESCALATED", "SUSPENSION_TIMEOUT"]
SWEEP_LATENCY = timedelta(seconds=1.5)  # a sweep a second, plus the step's own transaction


class LadderThroughTheWorkerTestCase:
    def test_reminders_escalation_and_deadline_at_their_times_with_their_emails(
        self, worker: Any, api: Any, users: dict[str, Any], load_agents: Any, mailbox: Any
    ) -> None:
        alice, carol = users["reviewer"], users["outsider"]
        emailed(alice, users["teammate"], carol)
        leads(carol)
        load_agents(HASTY)
        EmailOptIn.objects.create(user=alice, agent=None)

        r = api("reviewer").post("/api/threads", {"agent": "hasty", "message": "pay"})
        assert r.status_code == 201, r.content
        thread_id = r.json()["id"]
        wait_for(
            lambda: (
                Event.objects.filter(thread_id=thread_id, type="SUSPENSION_TIMEOUT").count() == 2
            ),
            timeout=20,
            what="both deadlines",
        )
        wait_for(lambda: Thread.objects.get(pk=thread_id).finished, timeout=10, what="the thread")

        for s in Suspension.objects.filter(thread_id=thread_id):
            assert s.status == Suspension.Status.TIMED_OUT
            steps = {
                (e.type, e.payload.get("reminder")): e
                for e in Event.objects.filter(suspension=s, type__in=LADDER)
            }
            assert set(steps) == {
                ("SUSPENSION_REMINDER", 1),
                ("SUSPENSION_REMINDER", 2),
                ("SUSPENSION_ESCALATED", None),
                ("SUSPENSION_TIMEOUT", None),
            }
            for key, before in [
                (("SUSPENSION_REMINDER", 1), 4),
                (("SUSPENSION_REMINDER", 2), 2),
                (("SUSPENSION_ESCALATED", None), 2),
            ]:
                due = s.expires_at - timedelta(seconds=before)
                late = steps[key].created_at - due
                assert timedelta(0) <= late <= SWEEP_LATENCY, (key, late)
                assert steps[key].payload.get("skipped", 0) == 0
            timeout = steps[("SUSPENSION_TIMEOUT", None)]
            assert timedelta(0) <= timeout.created_at - s.expires_at <= timedelta(seconds=1)
            assert steps[("SUSPENSION_ESCALATED", None)].payload["escalate_to"] == "leads"

        # The emails: made once per group and step; the request's and the first reminder's,
        # seconds before the deadline, sent; a later one sent, or skipped once the deadline
        # had passed. What was sent arrived, through the worker's SMTP backend.
        wait_for(
            lambda: not Email.objects.filter(thread_id=thread_id, status="pending").exists(),
            timeout=15,
            what="the emails to go",
        )
        emails = {(e.key.split(":")[0], e.key.split(":")[-1], e.to): e for e in Email.objects.all()}
        group = str(Suspension.objects.filter(thread_id=thread_id).first().group)
        assert all(group in e.key for e in emails.values())
        assert emails[("request", group, "alice@example.com")].status == "sent"
        assert emails[("reminder", "1", "alice@example.com")].status == "sent"
        assert emails[("escalation", "leads", "mallory@example.com")].status in ("sent", "skipped")
        assert ("reminder", "2", "alice@example.com") in emails
        assert not [k for k in emails if k[2] == "bob@example.com"]
        for e in emails.values():
            arrived = [m for m in mailbox.to(e.to) if m.message["X-Gateway-Email"] == str(e.pk)]
            assert len(arrived) == (1 if e.status == "sent" else 0), e

        [request] = [
            m for m in mailbox.to("alice@example.com") if "asks for a decision" in m.subject
        ]
        assert "It made 2 calls together" in request.body
        link = urlsplit(re.findall(r"Open it: (\S+)", request.body)[0])
        browser = Client()
        browser.force_login(alice)
        page = browser.get(link.path)
        assert page.status_code == 200
        assert f'id="{link.fragment}"' in page.content.decode()
