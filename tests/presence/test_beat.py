"""A server process's beat: its open sockets' rows live on; a dead process's rows, and rows a
failed leave left behind, stop counting and go."""

import uuid
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from agents import starting
from agents.engine import Engine
from agents.models import AgentDefinition, Suspension
from presence import actions
from presence.board import read_state
from presence.models import Claim, Viewer

AGENTS = """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds]
    script:
      - tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 5}}
      - text: Paid.
"""


class BeatTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, db: Any) -> None:
        load_agents(AGENTS)
        thread = starting.start_thread(
            AgentDefinition.objects.get(name="payer"), "go", users["admin"]
        )
        Engine().advance(thread.pk)
        self.sid = Suspension.objects.get().pk
        self.alice, self.bob = users["reviewer"], users["teammate"]

    def reviewer(self, user: Any, process: uuid.UUID) -> actions.Reviewer:
        return actions.Reviewer(uuid.uuid4(), process, user.pk, user.username)

    def test_a_dead_process_s_claim_and_views_stop_counting_and_go(self) -> None:
        dead, alive = uuid.uuid4(), uuid.uuid4()
        alice = self.reviewer(self.alice, dead)
        assert actions.claim(alice, self.sid) is None
        bob = self.reviewer(self.bob, alive)
        actions.look(bob, [self.sid])
        assert read_state([str(self.sid)])[str(self.sid)].claim.name == "alice"
        assert actions.claim(bob, self.sid).error == "claimed"

        later = timezone.now() + actions.STALE + timedelta(seconds=1)
        with time_machine.travel(later, tick=False):
            # The dead process no longer refreshes its rows: they count for nothing...
            card = read_state([str(self.sid)])[str(self.sid)]
            assert card.claim is None and card.viewers == ()
            # ...and the live process's beat keeps its own and deletes the dead one's.
            assert actions.beat(alive, [bob.socket]) is True
            assert list(Viewer.objects.values_list("user__username", flat=True)) == ["bob"]
            assert not Claim.objects.exists()
            assert actions.claim(bob, self.sid) is None

    def test_rows_of_a_socket_that_left_without_saying_so_go_with_the_next_beat(self) -> None:
        process = uuid.uuid4()
        gone, open_ = self.reviewer(self.alice, process), self.reviewer(self.bob, process)
        actions.claim(gone, self.sid)
        actions.look(open_, [self.sid])
        assert actions.beat(process, [open_.socket]) is True
        assert not Claim.objects.exists()
        assert list(Viewer.objects.values_list("socket", flat=True)) == [open_.socket]
        assert actions.beat(process, [open_.socket]) is False
