"""The sweeper under load: deadlines on a queue of their own, expired in batches exactly once;
re-enqueues that back off instead of piling up; a broker outage that loses nothing."""

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from agents import deadlines, decisions, dispatch, tasks
from agents.engine import Engine
from agents.models import Event, Suspension, Thread
from gateway.celery import app
from tests.approvals import state


def queue_of(task_name: str) -> str:
    return app.amqp.router.route({}, task_name)["queue"].name


class DeadlineQueueTestCase:
    def test_deadline_work_has_a_queue_of_its_own(self) -> None:
        assert queue_of("agents.tasks.sweep") == settings.CELERY_DEADLINE_QUEUE
        assert queue_of("agents.tasks.expire_suspension") == settings.CELERY_DEADLINE_QUEUE
        assert queue_of("agents.tasks.expire_input") == settings.CELERY_DEADLINE_QUEUE
        assert queue_of("agents.tasks.resume_thread") == settings.CELERY_TASK_DEFAULT_QUEUE
        assert settings.CELERY_DEADLINE_QUEUE != settings.CELERY_TASK_DEFAULT_QUEUE


class BatchExpiryTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], db: Any) -> None:
        self.alice = users["reviewer"]
        self.operator = users["operator"]  # starts the runs alice decides (four eyes)

    def test_overdue_suspensions_in_batches_each_expire_once_and_resume_once(
        self, django_capture_on_commit_callbacks: Any
    ) -> None:
        made = [state.suspended(self.operator, expires_in=60)[1][0] for _ in range(120)]
        # A group of two: the thread resumes only when both are done.
        pair_thread, pair = state.suspended(
            self.operator,
            calls=[("transfer_funds", dict(state.TRANSFER)), ("transfer_funds", state.TRANSFER)],
            expires_in=60,
        )
        Suspension.objects.filter(pk=pair[1].pk).update(
            expires_at=timezone.now() + timedelta(hours=1)
        )
        decided = made.pop()
        decisions.decide(decided, self.alice, {"approved": True})
        later = timezone.now() + timedelta(minutes=5)

        with django_capture_on_commit_callbacks() as callbacks:
            first = deadlines.expire_overdue(now=later, limit=50)
            rest = sum(deadlines.expire_overdue(now=later, limit=50) for _ in range(4))
        assert first == 50 and first + rest == len(made) + 1
        assert deadlines.expire_overdue(now=later) == 0

        timeouts = Event.objects.filter(type=Event.Type.SUSPENSION_TIMEOUT)
        assert sorted(str(e.suspension_id) for e in timeouts) == sorted(
            str(s.pk) for s in [*made, pair[0]]
        )
        assert Suspension.objects.get(pk=decided.pk).status == Suspension.Status.APPROVED
        assert Suspension.objects.get(pk=pair[1].pk).status == Suspension.Status.PENDING
        assert Thread.objects.get(pk=pair_thread.pk).status == Thread.Status.SUSPENDED
        resumed = [cb.args[1] for cb in callbacks if getattr(cb, "func", None) is dispatch.send]
        assert sorted(resumed) == sorted(str(s.thread_id) for s in made)
        # ...and the decided one's thread, which its decision resumed.
        assert Thread.objects.filter(status=Thread.Status.RUNNING).count() == len(made) + 1


class RequeueBackoffTestCase:
    def test_a_thread_nobody_takes_is_enqueued_again_less_and_less_often(
        self, users: dict[str, Any], db: Any
    ) -> None:
        thread = state.thread(users["reviewer"])
        start = timezone.now()
        Thread.objects.filter(pk=thread.pk).update(runnable_since=start)
        assert settings.STALLED_AFTER_SECONDS == 5
        # A minute of sweeps, one a second, while the queue is too long for the thread to be
        # taken: it is enqueued again after 5, 11, 22 and 43 seconds, not every 5.
        sent = [
            deadlines.requeue_stalled(now=start + timedelta(seconds=second + 0.5))
            for second in range(61)
        ]
        assert [second for second, n in enumerate(sent) if n] == [5, 11, 22, 43]
        thread.refresh_from_db()
        assert thread.requeues == 4

        # A worker that takes it resets the count.
        Engine().advance(thread.pk)
        assert Thread.objects.get(pk=thread.pk).requeues == 0


@pytest.mark.django_db(transaction=True)
class BrokerOutageTestCase:
    def test_a_stored_decision_answers_202_while_the_broker_is_down(
        self, api: Any, users: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        thread, [s] = state.suspended(users["operator"])

        def down(*args: Any, **options: Any) -> None:
            raise BrokerError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

        monkeypatch.setattr(tasks.resume_thread, "apply_async", down)
        answer = api("reviewer").post(state.resume_url(s), {"approved": True})

        assert answer.status_code == 202, answer.content
        s.refresh_from_db()
        assert s.status == Suspension.Status.APPROVED
        assert Thread.objects.get(pk=thread.pk).status == Thread.Status.RUNNING
        # The broker is back: the sweeper sends the thread that no worker took.
        sent: list[str] = []
        monkeypatch.setattr(
            tasks.resume_thread, "apply_async", lambda args, **options: sent.append(args[0])
        )
        later = timezone.now() + timedelta(seconds=settings.STALLED_AFTER_SECONDS + 1)
        assert deadlines.requeue_stalled(now=later) == 1
        assert sent == [str(thread.pk)]

    def test_a_run_started_while_the_broker_is_down_is_created_and_sent_later(
        self, api: Any, users: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        state.agent("payer")

        def down(*args: Any, **options: Any) -> None:
            raise BrokerError("Connection refused.")

        monkeypatch.setattr(tasks.start_thread, "apply_async", down)
        answer = api("operator").post("/api/threads", {"agent": "payer", "message": "go"})
        assert answer.status_code == 201, answer.content
        assert Thread.objects.get(pk=answer.json()["id"]).status == Thread.Status.RUNNING
