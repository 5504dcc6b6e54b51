"""The fan-out: each committed event gets one delivery per receiver that wants it, exactly
once, from a stored cursor, so nothing is lost between a commit and the enqueue."""

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from a2a_server.models import PushNotificationConfig
from agents import events, starting
from agents.models import AgentDefinition, Event, Thread
from webhooks import fanout, outbox
from webhooks.models import Cursor, Delivery, Subscription


def thread_of(agent: str, user: Any) -> Thread:
    definition = AgentDefinition.objects.get_or_create(name=agent, model="scripted")[0]
    return starting.start_thread(definition, "go", user)


@pytest.mark.django_db(transaction=True)
class FanOutTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], webhook_settings: Any) -> None:
        self.user = users["admin"]
        fanout.fan_out_all()  # the cursor starts after whatever is already there
        url = "http://127.0.0.1:9/"
        self.all = Subscription.objects.create(url=url, owner=self.user)
        self.completed = Subscription.objects.create(
            url=url, event_types=["THREAD_COMPLETED"], owner=self.user
        )
        self.payer = Subscription.objects.create(url=url, agent="payer", owner=self.user)
        self.off = Subscription.objects.create(url=url, enabled=False, owner=self.user)

    def delivered(self, s: Subscription) -> list[str]:
        rows = Delivery.objects.filter(subscription=s).select_related("event").order_by("id")
        return [d.event.type for d in rows]

    def test_each_subscription_gets_the_events_it_asked_for(self) -> None:
        payer = thread_of("payer", self.user)
        other = thread_of("other", self.user)
        events.record("THREAD_COMPLETED", thread_id=other.pk, payload={})
        fanout.fan_out_all()
        assert self.delivered(self.all) == ["THREAD_STARTED", "THREAD_STARTED", "THREAD_COMPLETED"]
        assert self.delivered(self.completed) == ["THREAD_COMPLETED"]
        assert [d.event.thread_id for d in Delivery.objects.filter(subscription=self.payer)] == [
            payer.pk
        ]
        assert self.delivered(self.off) == []

    def test_every_delivery_is_made_once_with_a_stable_id(self) -> None:
        thread_of("payer", self.user)
        fanout.fan_out_all()
        fanout.fan_out_all()
        d = Delivery.objects.get(subscription=self.all)
        assert d.webhook_id == f"msg_{d.event_id}_{self.all.pk.hex}"
        assert Delivery.objects.count() == 2  # all, payer
        assert Cursor.objects.get().position == Event.objects.latest("id").id

    def test_events_from_before_a_subscription_are_not_sent_to_it(self) -> None:
        thread_of("payer", self.user)
        late = Subscription.objects.create(url="http://127.0.0.1:9/", owner=self.user)
        fanout.fan_out_all()
        assert self.delivered(late) == []

    def test_a2a_push_configs_get_the_state_changes_of_their_task(self) -> None:
        thread = thread_of("payer", self.user)
        config = PushNotificationConfig.objects.create(
            thread=thread, config_id="c1", url="http://127.0.0.1:9/a2a"
        )
        events.record("AGENT_MESSAGE", thread_id=thread.pk, payload={"text": "hi"})
        events.record("INPUT_REQUIRED", thread_id=thread.pk, payload={"prompt": "Which?"})
        events.record("THREAD_COMPLETED", thread_id=thread.pk, payload={"result": "done"})
        fanout.fan_out_all()
        pushed = Delivery.objects.filter(push_config=config).select_related("event")
        assert [d.event.type for d in pushed.order_by("id")] == [
            "INPUT_REQUIRED",
            "THREAD_COMPLETED",
        ]

    def test_deliveries_whose_enqueue_was_lost_are_enqueued_by_the_sweep(self) -> None:
        thread_of("payer", self.user)
        fanout.fan_out_all()
        d = Delivery.objects.get(subscription=self.all)
        # Enqueued at once after commit, so the sweep leaves it alone for a while...
        assert outbox.enqueue_due() == 0
        # ...and enqueues it again once nobody has taken it for QUEUED_GRACE.
        later = timezone.now() + outbox.QUEUED_GRACE + timedelta(seconds=1)
        assert outbox.enqueue_due(now=later) == 2
        d2 = Delivery.objects.get(pk=d.pk)
        assert d2.lock_token != d.lock_token and d2.locked_until > later

    def test_the_receivers_answer_is_kept_a_while_and_forgotten_on_a_local_change(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        Subscription.objects.all().delete()
        monkeypatch.setattr(fanout._receivers_known, "ttl", 3600.0)
        assert fanout._receivers_known() is False
        # Made behind the ORM's back (as another process would): not seen before the TTL ends.
        Subscription.objects.bulk_create([Subscription(url="http://127.0.0.1:9/", owner=self.user)])
        assert fanout._receivers_known() is False
        monkeypatch.setattr(fanout._receivers_known, "ttl", 0.0)
        assert fanout._receivers_known() is True
        monkeypatch.setattr(fanout._receivers_known, "ttl", 3600.0)
        Subscription.objects.all().delete()  # saved and deleted here: forgotten at once
        assert fanout._receivers_known() is False
        thread = thread_of("payer", self.user)
        PushNotificationConfig.objects.create(
            thread=thread, config_id="c1", url="http://127.0.0.1:9/a2a"
        )
        assert fanout._receivers_known() is True

    def test_a_fan_out_that_fails_midway_leaves_the_cursor_where_it_was(self) -> None:
        thread_of("payer", self.user)
        before = Cursor.objects.get().position
        with pytest.raises(RuntimeError), transaction.atomic():
            fanout.fan_out()
            raise RuntimeError("the worker died")
        assert Cursor.objects.get().position == before
        assert not Delivery.objects.exists()
        fanout.fan_out_all()
        assert Delivery.objects.count() == 2


@pytest.mark.django_db(transaction=True)
class FanOutGapTestCase:
    def test_it_does_not_step_over_an_event_still_being_committed(
        self, users: dict[str, Any], webhook_settings: Any
    ) -> None:
        if connection.vendor != "postgresql":
            pytest.skip("ids commit out of order only on PostgreSQL")
        # Two chains (agents.chain): writers of one chain wait for each other's commit, so
        # ids commit out of order only across chains.
        other = thread_of("payer", users["admin"])
        fanout.fan_out_all()
        s = Subscription.objects.create(url="http://127.0.0.1:9/", owner=users["admin"])
        written, release = threading.Event(), threading.Event()
        slow: list[int] = []

        def slow_writer() -> None:
            with transaction.atomic():
                slow.append(events.record("AGENT_MESSAGE", payload={"text": "slow"}).id)
                written.set()
                release.wait(10)
            connection.close()

        writer = threading.Thread(target=slow_writer)
        writer.start()
        assert written.wait(10)
        fast = events.record("AGENT_MESSAGE", thread_id=other.pk, payload={"text": "fast"}).id
        assert fast > slow[0]
        fanout.fan_out_all()
        # The faster event is committed, but the cursor waits below the slower one.
        assert not Delivery.objects.filter(subscription=s).exists()
        assert Cursor.objects.get().position < slow[0]
        release.set()
        writer.join()
        fanout.fan_out_all()
        got = Delivery.objects.filter(subscription=s).values_list("event_id", flat=True)
        assert sorted(got) == [slow[0], fast]
