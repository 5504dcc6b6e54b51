"""The step a run's collaborators work on: the thread, the lane, the frame on top, its line.

agents.runs.Run holds one Step and passes it to its collaborators (the lease, the checkpoint,
the stack, the suspensions and the instances), which own their own state and nothing of it.
"""

from dataclasses import dataclass, field
from typing import Any

from agents.models import StackFrame, Thread
from agents.streaming import LiveWriter


@dataclass
class Step:
    thread: Thread
    # The agent instance whose lane this run drives (its frame and the sub-agents it pushed),
    # under the instance's lease; None: the thread's main stack.
    lane: StackFrame | None = None
    # The frame on top of the stack, the one this turn runs (set by the run at each turn).
    row: StackFrame = field(init=False)
    live: LiveWriter | None = None

    @property
    def lane_id(self) -> int | None:
        return self.lane.pk if self.lane is not None else None

    def where(self) -> dict[str, Any]:
        """Where an event of this step happened, as its payload says it."""
        return {
            "agent": self.row.agent_name,
            "frame": self.row.label,
            "frame_id": self.row.pk,
            "depth": self.row.depth,
            "lane": self.lane_id,
            "instance": self.lane.instance_name if self.lane is not None else None,
        }

    def close_live(self, alone: bool = True) -> None:
        """The frame stops working: its live view goes with the step's last commit, so no page
        sees a live line after the thread's end (LiveWriter.close is safe in a transaction).
        `alone=False`: no savepoint of its own; a failure fails the step's transaction."""
        if self.live is not None:
            self.live.close(alone=alone)
            self.live = None
