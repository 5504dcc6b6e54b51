"""verify_audit: the Event table's hash chains hold on a real trail, and a row changed, removed
or slipped in behind the gateway's back is named; on PostgreSQL the change itself is refused."""

import io
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, connection, transaction
from django.db.models import ProtectedError
from django.utils import timezone

from agents import deadlines, decisions, events, starting
from agents.engine import Engine
from agents.models import AgentDefinition, Event, Suspension, Thread
from tests.conftest import ROOT, wait_for, worker_env

AGENTS = """
agents:
  - name: payer
    model: scripted
    tools: [lookup_account, transfer_funds]
    script:
      - text: I will pay the supplier.
        tool_calls:
          - {name: lookup_account, input: {account: A-1}}
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 200}}
      - text: Paid.
"""

POSTGRES = connection.vendor == "postgresql"


def verify(*args: str) -> str:
    out = io.StringIO()
    call_command("verify_audit", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def broken(*args: str) -> tuple[str, str]:
    """verify_audit's report and its error, for a trail that must be broken."""
    out = io.StringIO()
    with pytest.raises(CommandError) as error:
        call_command("verify_audit", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue(), str(error.value)


def raw(sql: str, *params: Any) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def ids(thread_id: Any) -> list[int]:
    return list(Event.objects.filter(thread_id=thread_id).values_list("id", flat=True))


@pytest.mark.worker
class RealTrailTestCase:
    """A run started over the API, suspended by the worker, decided over the API, resumed by
    the worker to its end."""

    @pytest.fixture(autouse=True)
    def setup(self, worker: Any, api: Any, load_agents: Any) -> None:
        load_agents(AGENTS)
        operator, reviewer = api("operator"), api("reviewer")
        r = operator.post("/api/threads", {"agent": "payer", "message": "pay the supplier"})
        assert r.status_code == 201, r.content
        self.tid = r.json()["id"]
        s = wait_for(
            lambda: Suspension.objects.filter(thread_id=self.tid, status="pending").first(),
            timeout=30,
            what="the run to suspend",
        )
        url = f"/api/threads/{self.tid}/suspensions/{s.pk}/resume"
        assert reviewer.post(url, {"approved": True}).status_code == 202
        wait_for(
            lambda: Thread.objects.filter(pk=self.tid, status="completed").exists(),
            timeout=30,
            what="the run to complete",
        )
        self.events = list(Event.objects.filter(thread_id=self.tid))
        types = [e.type for e in self.events]
        assert "SUSPENSION_DECIDED" in types and types[-1] == "THREAD_COMPLETED"

    def test_the_trail_of_a_real_run_verifies(self) -> None:
        assert all(e.hash and len(e.hash) == 64 for e in self.events)
        assert self.events[0].prev_hash == ""
        assert [e.prev_hash for e in self.events[1:]] == [e.hash for e in self.events[:-1]]
        out = verify()
        assert out.startswith("OK ") and "0 broken" in out
        assert verify("--thread", self.tid).startswith(f"OK {len(self.events)} events in 1 chains")
        heads = verify("--heads")
        assert f"head {self.tid} #{self.events[-1].id} {self.events[-1].hash}" in heads

    @pytest.mark.skipif(POSTGRES, reason="on PostgreSQL the trigger refuses the change")
    def test_a_payload_changed_behind_the_gateways_back_is_named(self) -> None:
        decided = next(e for e in self.events if e.type == "SUSPENSION_DECIDED")
        raw(
            "UPDATE agents_event SET payload = %s WHERE id = %s",
            '{"approved": false, "status": "rejected"}',
            decided.id,
        )
        out, error = broken()
        assert (
            f"BROKEN event #{decided.id} (SUSPENSION_DECIDED) in thread {self.tid}: "
            "content changed" in out
        )
        assert "1 broken" in out and f"#{decided.id}" in error
        # The exit status says so too, for a script or a cron job.
        run = subprocess.run(
            [sys.executable, "manage.py", "verify_audit"],
            cwd=ROOT,
            env=worker_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 1, run.stdout + run.stderr
        assert f"event #{decided.id}" in run.stdout

    @pytest.mark.skipif(POSTGRES, reason="on PostgreSQL the trigger refuses the change")
    def test_a_row_deleted_from_the_middle_is_named_at_the_next_link(self) -> None:
        middle, after = self.events[3], self.events[4]
        raw("DELETE FROM agents_event WHERE id = %s", middle.id)
        out, _ = broken()
        assert (
            f"BROKEN event #{after.id} ({after.type}) in thread {self.tid}: link broken: "
            f"its prev_hash is not the hash of #{self.events[2].id}" in out
        )

    @pytest.mark.skipif(POSTGRES, reason="on PostgreSQL the trigger refuses the change")
    def test_the_first_row_deleted_is_named(self) -> None:
        raw("DELETE FROM agents_event WHERE id = %s", self.events[0].id)
        out, _ = broken()
        assert (
            f"BROKEN event #{self.events[1].id} ({self.events[1].type}) in thread {self.tid}: "
            "link missing: it is the chain's first row but points to a previous hash" in out
        )

    @pytest.mark.skipif(not POSTGRES, reason="the trigger is PostgreSQL's")
    def test_postgresql_refuses_the_update_and_the_delete(self) -> None:
        decided = next(e for e in self.events if e.type == "SUSPENSION_DECIDED")
        for sql in (
            "UPDATE agents_event SET payload = '{}' WHERE id = %s",
            "DELETE FROM agents_event WHERE id = %s",
        ):
            with pytest.raises(IntegrityError, match="agents_event is append-only"):
                with transaction.atomic():
                    raw(sql, decided.id)
        with pytest.raises(IntegrityError, match="append-only: UPDATE"):
            with transaction.atomic():
                Event.objects.filter(thread_id=self.tid).update(actor_name="someone else")
        # The ORM does not cascade into the trail either.
        with pytest.raises(ProtectedError):
            Thread.objects.filter(pk=self.tid).delete()
        assert [e.id for e in Event.objects.filter(thread_id=self.tid)] == [
            e.id for e in self.events
        ]
        assert verify().startswith("OK ")


class ChainTestCase:
    """The chain in one process, on either database."""

    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any) -> None:
        load_agents(AGENTS)
        self.users = users

    def suspended(self) -> tuple[Thread, Suspension]:
        agent = AgentDefinition.objects.get(name="payer")
        thread = starting.start_thread(agent, "go", self.users["operator"])
        Engine().advance(thread.pk)
        return thread, Suspension.objects.get(thread=thread)

    def test_a_savepoint_rolled_back_takes_its_events_out_of_the_chain(self) -> None:
        thread, _ = self.suspended()
        with transaction.atomic():
            kept = events.record("AGENT_MESSAGE", thread_id=thread.pk, payload={"n": 1})
            try:
                with transaction.atomic():
                    events.record("AGENT_MESSAGE", thread_id=thread.pk, payload={"n": 2})
                    raise RuntimeError("undone")
            except RuntimeError:
                pass
            last = events.record("AGENT_MESSAGE", thread_id=thread.pk, payload={"n": 3})
        assert last.prev_hash == kept.hash
        assert verify().startswith("OK ")

    def test_events_written_before_the_chain_are_unchained_not_broken(self) -> None:
        # As if written by the gateway before migration 0007: no hash.
        thread = Thread.objects.create(agent=AgentDefinition.objects.get(name="payer"))
        old = [Event.objects.create(thread=thread, type="AGENT_MESSAGE") for _ in range(2)]
        first = events.record("AGENT_MESSAGE", thread_id=thread.pk, payload={"text": "hi"})
        assert first.prev_hash == "" and first.hash
        out = verify()
        assert out.startswith("OK ") and "2 unchained" in out
        # Written after the chain began, an event with no hash was slipped in.
        slipped = Event.objects.create(thread=thread, type="AGENT_MESSAGE")
        out, _ = broken("--thread", str(thread.pk))
        assert f"BROKEN event #{slipped.id} (AGENT_MESSAGE) in thread {thread.pk}: unchained" in out
        assert old[0].id < first.id < slipped.id

    def test_a_batch_and_the_threadless_chain_are_chained_in_order(self) -> None:
        thread, s = self.suspended()
        Suspension.objects.filter(pk=s.pk).update(expires_at=timezone.now())
        assert deadlines.expire_overdue(now=timezone.now() + timedelta(seconds=1)) == 1
        events.record("TOKEN_CREATED", actor=self.users["admin"], payload={"name": "ci"})
        events.record("TOKEN_REVOKED", actor=self.users["admin"], payload={"name": "ci"})
        threadless = list(Event.objects.filter(thread__isnull=True))
        assert [e.type for e in threadless][-2:] == ["TOKEN_CREATED", "TOKEN_REVOKED"]
        assert [e.prev_hash for e in threadless] == ["", *[e.hash for e in threadless[:-1]]]
        assert verify().startswith("OK ")
        assert Event.objects.get(suspension=s, type="SUSPENSION_TIMEOUT").hash

    def test_a_deleted_user_is_still_named_in_the_trail_and_it_verifies(self) -> None:
        thread, s = self.suspended()
        leaver = User.objects.create_user("carol", password="carol-password-1")
        leaver.groups.set(self.users["reviewer"].groups.all())
        decisions.decide(s, leaver, {"approved": False, "reason": "not today"})
        leaver_id = leaver.pk
        leaver.delete()
        decided = Event.objects.get(thread=thread, type="SUSPENSION_DECIDED")
        # The reference is neither cascaded nor nulled: the id and the name stay.
        assert decided.actor_id == leaver_id and decided.actor_name == "carol"
        assert not User.objects.filter(pk=leaver_id).exists()
        Engine().advance(thread.pk)
        assert Thread.objects.get(pk=thread.pk).status == "completed"
        assert verify().startswith("OK ")

    def test_a_thread_with_a_trail_is_not_deleted(self) -> None:
        thread, _ = self.suspended()
        with pytest.raises(ProtectedError):
            thread.delete()
        assert Event.objects.filter(thread=thread).exists()

    def test_a_bad_thread_id_is_refused(self) -> None:
        with pytest.raises(CommandError, match="--thread takes a thread's id"):
            verify("--thread", "nope")


def at_once(count: int, writer: Callable[[int], None]) -> None:
    """`writer(n)` in `count` threads let go together, each with its own connection; what
    any of them raised fails the test."""
    start = threading.Barrier(count)
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            start.wait(10)
            writer(n)
        except BaseException as e:  # reported below
            errors.append(e)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []


@pytest.mark.skipif(not POSTGRES, reason="concurrent writers need PostgreSQL")
class ConcurrentWritersTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, transactional_db: Any) -> None:
        load_agents(AGENTS)
        self.thread = starting.start_thread(
            AgentDefinition.objects.get(name="payer"), "go", users["operator"]
        )
        self.admin = users["admin"]

    def test_writers_of_one_thread_at_once_make_one_unbroken_chain(self) -> None:
        def writer(n: int) -> None:
            for i in range(15):
                with transaction.atomic():
                    if i % 3 == 0:
                        events.record_many(
                            [
                                Event(type="AGENT_MESSAGE", thread_id=self.thread.pk)
                                for _ in range(2)
                            ]
                        )
                    events.record(
                        "AGENT_MESSAGE", thread_id=self.thread.pk, payload={"w": n, "i": i}
                    )
                if i % 5 == 0:
                    events.record("TOKEN_CREATED", payload={"w": n, "i": i})

        at_once(8, writer)
        rows = list(Event.objects.filter(thread=self.thread))
        assert len(rows) == 1 + 8 * (15 + 5 * 2)
        # One chain: every event links to the one before it in id order, no fork.
        assert [e.prev_hash for e in rows] == ["", *[e.hash for e in rows[:-1]]]
        assert len({e.prev_hash for e in rows}) == len(rows)
        threadless = list(Event.objects.filter(thread__isnull=True))
        assert len([e for e in threadless if e.type == "TOKEN_CREATED"]) == 8 * 3
        assert [e.prev_hash for e in threadless] == ["", *[e.hash for e in threadless[:-1]]]
        assert verify().startswith("OK ")

    def test_writers_of_two_threads_crosswise_make_two_unbroken_chains(self) -> None:
        # Each transaction writes to both threads, half of them in the other order: the chains'
        # locks are taken in id order whatever the order of the events, so no two writers wait
        # on each other crosswise (a deadlock would be an error here), and each thread keeps
        # one chain.
        other = starting.start_thread(self.thread.agent, "go too", self.admin)
        pair = [self.thread.pk, other.pk]

        def writer(n: int) -> None:
            for i in range(12):
                order = pair if (n + i) % 2 else pair[::-1]
                with transaction.atomic():
                    events.record_many(
                        [Event(type="AGENT_MESSAGE", thread_id=t, payload={"w": n}) for t in order]
                    )

        at_once(6, writer)
        for thread_id in pair:
            rows = list(Event.objects.filter(thread_id=thread_id))
            assert len(rows) == 1 + 6 * 12
            assert [e.prev_hash for e in rows] == ["", *[e.hash for e in rows[:-1]]]
        assert verify().startswith("OK ")
