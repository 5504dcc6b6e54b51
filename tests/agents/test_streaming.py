"""LiveWriter: a model's text as it is written, kept in one LiveText row per frame."""

from typing import Any

import pytest
from django.db import OperationalError, transaction

from agents import streaming
from agents.models import AgentDefinition, LiveText, StackFrame, Thread
from agents.streaming import LiveWriter


class Clock:
    """A hand-moved monotonic clock (LiveWriter's `clock`)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def working_frame() -> StackFrame:
    agent = AgentDefinition.objects.create(name="writer")
    thread = Thread.objects.create(agent=agent)
    return StackFrame.objects.create(thread=thread, agent_name="writer", model="scripted")


def row(frame: StackFrame) -> LiveText | None:
    return LiveText.objects.filter(frame=frame).first()


@pytest.mark.django_db(transaction=True)
class LiveWriterTestCase:
    @pytest.fixture(autouse=True)
    def setup(self) -> None:
        self.frame = working_frame()
        self.clock = Clock()
        self.writer = LiveWriter(self.frame.thread_id, self.frame.pk, clock=self.clock)

    def test_it_coalesces_many_deltas_into_few_writes(self) -> None:
        words = [f"word{n} " for n in range(200)]
        for word in words:
            self.writer.text(word)
            self.clock.now += 0.01  # a delta every 10 ms, for two seconds
        live = row(self.frame)
        # About one write per 0.1 s, not one per delta.
        assert 15 <= live.seq <= 25
        self.writer.tool("lookup_account")
        live = row(self.frame)
        assert live.text == "".join(words)  # what waited is written with the activity
        assert live.activity == "calling lookup_account…"

    def test_the_first_delta_is_written_at_once_and_the_next_after_the_interval(self) -> None:
        self.writer.text("Hello")
        assert (row(self.frame).text, row(self.frame).seq) == ("Hello", 1)
        self.writer.text(", wor")
        assert row(self.frame).seq == 1
        self.clock.now += 0.15
        self.writer.text("ld")
        assert (row(self.frame).text, row(self.frame).seq) == ("Hello, world", 2)

    def test_a_restart_voids_the_text_so_far(self) -> None:
        self.writer.text("First try")
        self.writer.restart()
        assert (row(self.frame).text, row(self.frame).seq) == ("", 2)
        self.clock.now += 1
        self.writer.text("Second")
        assert row(self.frame).text == "Second"

    def test_a_saved_message_clears_the_text_and_keeps_the_activity(self) -> None:
        self.writer.text("Checking the account.")
        self.writer.activity("calling lookup_account…")
        self.writer.message_saved()
        live = row(self.frame)
        assert (live.text, live.activity) == ("", "calling lookup_account…")
        self.writer.activity("waiting for approval")
        assert row(self.frame).activity == "waiting for approval"

    def test_close_deletes_the_row(self) -> None:
        self.writer.text("Almost done")
        self.writer.close()
        assert row(self.frame) is None
        # A later answer in the same frame starts a row of its own.
        self.writer.text("Again")
        assert (row(self.frame).text, row(self.frame).seq) == ("Again", 1)

    def test_nothing_to_show_writes_no_row(self) -> None:
        self.writer.restart()
        self.writer.message_saved()
        self.writer.activity("")
        assert row(self.frame) is None

    def test_a_second_writer_of_the_frame_goes_on_from_the_row(self) -> None:
        self.writer.text("one")
        other = LiveWriter(self.frame.thread_id, self.frame.pk, clock=self.clock)
        other.text("two")
        assert (row(self.frame).text, row(self.frame).seq) == ("two", 2)

    def test_a_long_activity_is_cut_to_the_column(self) -> None:
        self.writer.activity("x" * 1000)
        assert row(self.frame).activity == "x" * streaming.ACTIVITY_LIMIT

    def test_a_failing_write_is_logged_and_does_not_raise(
        self, monkeypatch: pytest.MonkeyPatch, caplog: Any
    ) -> None:
        class Broken:
            def filter(self, **kwargs: Any) -> Any:
                raise OperationalError("the database went away")

        monkeypatch.setattr(LiveText, "objects", Broken())
        self.writer.text("Hello")
        self.writer.tool("lookup_account")
        self.writer.restart()
        self.writer.message_saved()
        self.writer.close()
        assert "write failed" in caplog.text and "delete failed" in caplog.text

    def test_inside_a_transaction_a_failed_write_leaves_it_usable(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise OperationalError("the row is locked")

        with transaction.atomic():
            monkeypatch.setattr(LiveWriter, "_store", fail)
            self.writer.text("Hello")
            monkeypatch.undo()
            self.writer.clock.now += 1
            self.writer.text(" there")
            assert Thread.objects.filter(pk=self.frame.thread_id).exists()
        assert row(self.frame).text == "Hello there"

    def test_a_failed_wake_up_does_not_raise(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def broadcast(message: dict) -> None:
            raise ConnectionError("redis is away")

        monkeypatch.setattr(streaming.events, "broadcast", broadcast)
        self.writer.text("Hello")
        assert row(self.frame).text == "Hello"
