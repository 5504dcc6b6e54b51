"""The board reads claims and viewers as of one moment: a socket that leaves between its two
reads is seen either still there (its claim and its view) or gone (neither), never half."""

import threading
import uuid
from typing import Any

import pytest
from django.db import connection

from agents import starting
from agents.engine import Engine
from agents.models import AgentDefinition, Suspension
from presence import actions, board
from presence.models import Claim
from tests.presence.test_beat import AGENTS


@pytest.mark.django_db(transaction=True)
def test_a_leave_between_the_two_reads_is_seen_whole_or_not_at_all(
    users: dict[str, Any], load_agents: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    if connection.vendor != "postgresql":
        # SQLite's read transaction holds a lock that keeps the leave from committing until the
        # read ends, so the two reads cannot straddle it there.
        pytest.skip("the race needs PostgreSQL's concurrent writers")
    load_agents(AGENTS)
    thread = starting.start_thread(AgentDefinition.objects.get(name="payer"), "go", users["admin"])
    Engine().advance(thread.pk)
    sid = Suspension.objects.get().pk
    alice = actions.Reviewer(uuid.uuid4(), uuid.uuid4(), users["reviewer"].pk, "alice")
    assert actions.claim(alice, sid) is None
    actions.look(alice, [sid])

    def leave_elsewhere() -> None:
        try:
            assert actions.leave(alice.socket) is True  # committed on its own connection
        finally:
            connection.close()

    class LeavesFirst:
        """Claim, whose rows are read after the socket left (the viewers were read before)."""

        class objects:
            @staticmethod
            def filter(*args: Any, **kwargs: Any) -> Any:
                other = threading.Thread(target=leave_elsewhere)
                other.start()
                other.join()
                return Claim.objects.filter(*args, **kwargs)

    monkeypatch.setattr(board, "Claim", LeavesFirst)
    card = board.read_state([str(sid)])[str(sid)]
    assert card.claim is not None and card.claim.name == "alice"
    assert [name for _, name in card.viewers] == ["alice"]
    monkeypatch.undo()
    # Read again, afterwards: the leave is seen whole.
    card = board.read_state([str(sid)])[str(sid)]
    assert card.claim is None and card.viewers == ()
