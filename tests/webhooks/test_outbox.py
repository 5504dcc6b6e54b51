"""Sending one delivery, in this process, to a real receiver: signed, retried on the schedule,
dead-lettered, a failing subscription disabled and its owner told; SSRF checked again."""

import logging
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.db import connection, transaction
from django.utils import timezone

from a2a_server.models import PushNotificationConfig
from agents import decisions, events, receipt_keys, receipts
from agents.models import AgentDefinition, Event, Thread
from tests.approvals import state
from tests.webhooks.receiver import closed_port_url
from webhooks import fanout, outbox
from webhooks.models import Attempt, Delivery, Subscription
from webhooks.outbox import Outbox


def fanned_out(s: Subscription | None = None, **filters: Any) -> list[Delivery]:
    fanout.fan_out_all()
    rows = Delivery.objects.filter(**({"subscription": s} if s else {}), **filters)
    return list(rows.order_by("id"))


def send(d: Delivery, box: Outbox | None = None) -> str:
    token = Delivery.objects.get(pk=d.pk).lock_token
    return (box or Outbox()).send(d.pk, token)


@pytest.mark.django_db(transaction=True)
class OutboxTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], webhook_settings: Any, receiver: Any) -> None:
        self.users = users
        self.owner = users["admin"]
        self.owner.email = "admin@example.com"
        self.owner.save()
        self.settings = webhook_settings
        self.start_receiver = receiver
        fanout.fan_out_all()

    def subscribe(self, url: str, **fields: Any) -> Subscription:
        return Subscription.objects.create(url=url, owner=self.owner, **fields)

    def test_each_post_is_signed_so_standardwebhooks_verifies_it(self) -> None:
        s = self.subscribe("")
        r = self.start_receiver(secret=s.secret)
        Subscription.objects.filter(pk=s.pk).update(url=r.url)
        event = events.record("AGENT_MESSAGE", payload={"text": "héllo"})
        [d] = fanned_out(s)
        assert send(d) == "succeeded"
        [got] = r.requests
        assert got.verified is True, got.error
        assert got.json == event.as_message() == Event.objects.get(pk=event.pk).as_message()
        assert got.webhook_id == d.webhook_id
        assert got.headers["content-type"] == "application/json"
        d.refresh_from_db()
        assert (d.status, d.attempts, d.last_status_code) == ("succeeded", 1, 200)
        assert d.finished_at is not None and d.last_response_ms is not None
        [attempt] = Attempt.objects.filter(delivery=d)
        assert attempt.succeeded and attempt.status_code == 200 and attempt.response_body == "ok"
        # A second task for the same delivery finds it done.
        assert send(d) == "taken" and len(r.requests) == 1

    def test_a_failed_attempt_is_retried_after_its_wait_with_jitter(self) -> None:
        r = self.start_receiver(fail_first=10)
        s = self.subscribe(r.url)
        events.record("AGENT_MESSAGE", payload={})
        [d] = fanned_out(s)
        now = timezone.now() + timedelta(seconds=1)
        box = Outbox(clock=lambda: now, jitter=lambda: 1.25)
        assert send(d, box) == "retry"
        d.refresh_from_db()
        assert (d.status, d.attempts, d.retries, d.last_status_code) == ("pending", 1, 1, 500)
        assert d.last_error == "HTTP 500" and d.lock_token == ""
        wait = self.settings.WEBHOOKS_RETRY_SCHEDULE[0] * 1.25
        assert d.next_attempt_at == now + timedelta(seconds=wait)
        # Not before its time, by a task or by the sweep.
        assert send(d, box) == "taken"
        assert outbox.enqueue_due(now=now) == 0
        assert outbox.enqueue_due(now=d.next_attempt_at) == 1

    def test_a_receiver_that_trickles_its_answer_is_cut_off_and_retried(self) -> None:
        # A byte every 0.1 s: each read well within WEBHOOKS_TIMEOUT_SECONDS (4 s), the whole
        # answer (about 270 bytes) some 27 s.
        self.settings.WEBHOOKS_DELIVERY_TIMEOUT_SECONDS = 1
        r = self.start_receiver(trickle=0.1)
        s = self.subscribe(r.url)
        events.record("AGENT_MESSAGE", payload={})
        [d] = fanned_out(s)

        started = time.monotonic()
        assert send(d) == "retry"

        assert time.monotonic() - started < 3
        d.refresh_from_db()
        assert (d.status, d.attempts, d.retries) == ("pending", 1, 1)
        assert d.last_error == "DeliveryTimeout: no whole answer within 1 s"
        assert d.next_attempt_at is not None and d.lock_token == ""
        [attempt] = Attempt.objects.filter(delivery=d)
        assert not attempt.succeeded and attempt.error == d.last_error
        assert attempt.response_ms is not None and 1000 <= attempt.response_ms < 3000

    def test_the_last_failure_dead_letters_and_repeated_dead_letters_disable(
        self, caplog: Any
    ) -> None:
        self.settings.WEBHOOKS_RETRY_SCHEDULE = [0.0]
        s = self.subscribe(closed_port_url())
        for i in range(3):
            events.record("AGENT_MESSAGE", payload={"n": i})
        first, second, third = fanned_out(s)
        assert send(first) == "retry"
        assert send(first) == "dead-lettered"
        first.refresh_from_db()
        assert first.status == "failed" and first.attempts == 2
        assert "ConnectError" in first.last_error and first.last_status_code is None
        assert Subscription.objects.get(pk=s.pk).enabled  # one dead letter is not enough
        send(second)
        with caplog.at_level(logging.WARNING, logger="webhooks.outbox"):
            assert send(second) == "dead-lettered"
        s.refresh_from_db()
        assert not s.enabled and "last 2 deliveries" in s.disabled_reason
        notice = Event.objects.get(type="WEBHOOK_DISABLED")
        assert notice.payload["subscription"] == str(s.pk)
        assert notice.payload["owner"] == "admin" and notice.payload["host"] == "127.0.0.1"
        assert any("disabled" in m and str(s.pk) in m for m in caplog.messages)
        [email] = mail.outbox
        assert email.to == ["admin@example.com"] and s.url in email.body
        # The third waits, pending, for the subscription to be enabled again.
        third.refresh_from_db()
        assert third.status == "pending"
        assert send(third) == "disabled"
        assert outbox.enqueue_due() == 0

    def test_two_deliveries_dead_lettered_at_once_still_disable_it(self) -> None:
        if connection.vendor != "postgresql":
            pytest.skip("SQLite lets one transaction write at a time, so the two cannot overlap")
        s = self.subscribe(closed_port_url())
        for i in range(2):
            events.record("AGENT_MESSAGE", payload={"n": i})
        first, second = fanned_out(s)
        now = timezone.now()
        first_checked, first_may_commit = threading.Event(), threading.Event()
        said: dict[str, Any] = {}

        def dead_letter(d: Delivery, name: str, before_commit: threading.Event | None) -> None:
            # What Outbox.record does for a last failed attempt, each on its own connection.
            try:
                with transaction.atomic():
                    Delivery.objects.filter(pk=d.pk).update(status="failed", finished_at=now)
                    said[name] = outbox.disable_if_failing(s.pk, now)
                    if before_commit is not None:
                        first_checked.set()
                        before_commit.wait(10)
            except Exception as e:  # the assertion below reports it
                said[name] = e
            finally:
                connection.close()

        a = threading.Thread(target=dead_letter, args=(first, "first", first_may_commit))
        a.start()
        assert first_checked.wait(10)
        b = threading.Thread(target=dead_letter, args=(second, "second", None))
        b.start()
        # The second worker's check must wait for the first to commit; given a second, an
        # unlocked check would have read the first delivery as pending and given up.
        b.join(1)
        first_may_commit.set()
        a.join(10)
        b.join(10)
        assert said == {"first": False, "second": True}
        s.refresh_from_db()
        assert not s.enabled and "last 2 deliveries" in s.disabled_reason

    def test_a_private_address_is_refused_again_at_delivery(self) -> None:
        r = self.start_receiver()
        s = self.subscribe(r.url)  # allowed when it was made
        events.record("AGENT_MESSAGE", payload={})
        [d] = fanned_out(s)
        self.settings.WEBHOOKS_ALLOW_PRIVATE = False
        assert send(d) == "retry"
        d.refresh_from_db()
        assert d.last_error.startswith("Refused: 127.0.0.1 resolves to 127.0.0.1, a loopback")
        assert r.requests == []

    def test_a2a_push_sends_the_task_state_with_the_configs_authentication(self) -> None:
        r = self.start_receiver()
        agent = AgentDefinition.objects.create(name="clerk", model="scripted")
        thread = Thread.objects.create(agent=agent)
        new = PushNotificationConfig.objects.create(
            thread=thread,
            config_id="new",
            url=r.url,
            token="task-token",
            authentication={"scheme": "Bearer", "credentials": "push-secret"},
        )
        old = PushNotificationConfig.objects.create(
            thread=thread,
            config_id="old",
            url=r.url,
            authentication={"schemes": ["Basic"], "credentials": "dXNlcjpwdw=="},
        )
        events.record("INPUT_REQUIRED", thread_id=thread.pk, payload={"prompt": "Which form?"})
        for d in fanned_out():
            assert send(d) == "succeeded"
        by_auth = {g.headers.get("authorization"): g for g in r.requests}
        assert set(by_auth) == {"Bearer push-secret", "Basic dXNlcjpwdw=="}
        got = by_auth["Bearer push-secret"]
        assert got.headers["x-a2a-notification-token"] == new.token
        assert "x-a2a-notification-token" not in by_auth["Basic dXNlcjpwdw=="].headers
        assert got.headers["content-type"] == "application/a2a+json"
        update = got.json["statusUpdate"]
        assert update["taskId"] == update["contextId"] == str(thread.pk)
        assert update["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        # What a stream of the task says at this point (a2a_server.mapping.Fold).
        message = update["status"]["message"]
        assert message["role"] == "ROLE_AGENT" and message["parts"][0]["text"] == "Which form?"
        assert message["parts"][1]["data"]["input"]["prompt"] == "Which form?"
        assert update["metadata"]["eventType"] == "INPUT_REQUIRED"
        assert old.pk  # both configs of the task were sent to

    def test_an_a2a_push_receiver_that_trickles_its_answer_is_cut_off_too(self) -> None:
        self.settings.WEBHOOKS_DELIVERY_TIMEOUT_SECONDS = 1
        r = self.start_receiver(trickle=0.1)
        agent = AgentDefinition.objects.create(name="clerk", model="scripted")
        thread = Thread.objects.create(agent=agent)
        PushNotificationConfig.objects.create(thread=thread, config_id="slow", url=r.url)
        events.record("INPUT_REQUIRED", thread_id=thread.pk, payload={"prompt": "Which form?"})
        [d] = fanned_out(push_config__isnull=False)

        started = time.monotonic()
        assert send(d) == "retry"

        assert time.monotonic() - started < 3
        d.refresh_from_db()
        assert d.last_error == "DeliveryTimeout: no whole answer within 1 s" and d.retries == 1

    def test_a_decision_s_webhook_carries_its_signed_receipt(self) -> None:
        s = self.subscribe("")
        r = self.start_receiver(secret=s.secret)
        Subscription.objects.filter(pk=s.pk).update(url=r.url)
        _, [pending] = state.suspended(self.owner)
        decided = decisions.decide(pending, self.users["reviewer"], {"approved": True})
        [d] = fanned_out(s, event__type=Event.Type.SUSPENSION_DECIDED)
        assert send(d) == "succeeded"
        [got] = r.requests
        receipt = got.json["payload"]["receipt"]
        assert receipt == decided.suspension.receipt
        assert receipts.verify(receipt, receipt_keys.jwks())["suspension"] == str(pending.pk)
