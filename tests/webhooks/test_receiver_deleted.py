"""A receiver (a subscription, or an A2A task's push config) deleted while a worker records an
attempt at one of its deliveries: the deletion waits for that attempt and takes it along,
instead of failing on the attempt it did not see (a foreign key checked at commit)."""

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from a2a_server import push
from a2a_server.models import PushNotificationConfig
from agents import events
from agents.models import AgentDefinition, Thread
from webhooks import actions, fanout
from webhooks.models import Attempt, Delivery, Subscription


def blocked_on_a_lock(timeout: float = 10) -> bool:
    """Another connection of this database waits for a row lock."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return True
            time.sleep(0.02)
    return False


def delete_while_an_attempt_is_recorded(d: Delivery, delete: Callable[[], Any]) -> Any:
    """What Outbox.record does (the delivery's row updated, then its attempt written) on one
    connection, with `delete` on another in between; what `delete` returned or raised."""
    updated, may_commit = threading.Event(), threading.Event()
    said: dict[str, Any] = {}

    def record() -> None:
        try:
            with transaction.atomic():
                Delivery.objects.filter(pk=d.pk).update(attempts=F("attempts") + 1)
                updated.set()
                may_commit.wait(10)
                Attempt.objects.create(
                    delivery=d, number=1, started_at=timezone.now(), succeeded=True
                )
        finally:
            connection.close()

    def deleting() -> None:
        try:
            said["deleted"] = delete()
        except Exception as e:  # the assertion below reports it
            said["deleted"] = e
        finally:
            connection.close()

    recorder = threading.Thread(target=record)
    recorder.start()
    assert updated.wait(10)
    deleter = threading.Thread(target=deleting)
    deleter.start()
    assert blocked_on_a_lock()  # the deletion waits for the delivery's row
    may_commit.set()
    recorder.join(10)
    deleter.join(10)
    return said["deleted"]


@pytest.mark.django_db(transaction=True)
class ReceiverDeletedTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], webhook_settings: Any) -> None:
        if connection.vendor != "postgresql":
            pytest.skip("SQLite lets one transaction write at a time, so the two cannot overlap")
        self.users = users
        fanout.fan_out_all()

    def test_a_subscription_deleted_while_an_attempt_is_recorded(self) -> None:
        s = Subscription.objects.create(url="http://127.0.0.1:9/", owner=self.users["admin"])
        events.record("AGENT_MESSAGE", payload={})
        fanout.fan_out_all()
        [d] = Delivery.objects.filter(subscription=s)

        deleted = delete_while_an_attempt_is_recorded(
            d, lambda: actions.delete_subscription(s.pk, self.users["admin"])
        )

        assert deleted is True
        assert not Subscription.objects.filter(pk=s.pk).exists()
        assert not Delivery.objects.exists() and not Attempt.objects.exists()

    def test_a_push_config_deleted_while_an_attempt_is_recorded(self) -> None:
        agent = AgentDefinition.objects.create(name="clerk", model="scripted")
        thread = Thread.objects.create(agent=agent)
        PushNotificationConfig.objects.create(
            thread=thread, config_id="mine", url="http://127.0.0.1:9/"
        )
        events.record("INPUT_REQUIRED", thread_id=thread.pk, payload={"prompt": "Which?"})
        fanout.fan_out_all()
        [d] = Delivery.objects.filter(push_config__isnull=False)

        deleted = delete_while_an_attempt_is_recorded(
            d, lambda: push.delete(self.users["admin"], str(thread.pk), "mine")
        )

        assert deleted is None
        assert not PushNotificationConfig.objects.exists()
        assert not Delivery.objects.exists() and not Attempt.objects.exists()
