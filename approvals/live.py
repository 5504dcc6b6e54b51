"""Live text on the sockets: LIVE_TEXT messages from the LiveText rows of watched threads.

Live text (agents.streaming) is not an event: it has no id and never moves a socket's cursor.
A socket that watches a thread (the thread page's, `/ws/events/?after=N&thread=<uuid>`) gets,
for each frame of that thread with a LiveText row, the row as it is when it watches and then
each change, as one message:

    {"type": "LIVE_TEXT", "thread": uuid, "frame_id": int, "frame": "agent:research[2]",
     "lane": int | null, "seq": int, "text": str, "activity": str, "cut": int, "done": bool}

`seq` grows with each write of the row (a page applies a message only if its seq is newer than
the one it shows); `lane` is the instance frame the frame works in (null on the main stack);
`cut` is how many characters at the start of `text` were left out to keep the message under
MESSAGE_LIMIT (the text is whole once its AGENT_MESSAGE event is stored). When the row is
deleted (the frame stopped working) the message comes once more with `"done": true`, the last
seq, and empty text and activity; a row made again for the same frame (seq from 1) follows its
`done`. The hub reads the rows of watched threads only: at once when the channel layer brings a
wake-up from the writer, and every SAFETY_POLL regardless; with no channel layer, every
TAIL_INTERVAL.
"""

import json
from dataclasses import dataclass
from typing import Any

from agents.models import LiveText
from agents.wire import MESSAGE_LIMIT

LIVE_TEXT = "LIVE_TEXT"


@dataclass(frozen=True)
class LiveFrame:
    """One LiveText row as the hub last read it, with its socket message."""

    frame_id: int
    thread: str
    seq: int
    updated_at: Any
    label: str
    lane: int | None
    text: str  # the LIVE_TEXT socket message, JSON-encoded once for every socket

    def done(self) -> str:
        return live_message(self.thread, self.frame_id, self.label, self.lane, self.seq, done=True)


def live_message(
    thread: str,
    frame_id: int,
    label: str,
    lane: int | None,
    seq: int,
    text: str = "",
    activity: str = "",
    done: bool = False,
) -> str:
    """A LIVE_TEXT socket message of at most MESSAGE_LIMIT bytes. A longer text travels as
    its tail, which is what a reader watches grow; `cut` counts the characters left out."""
    message = {
        "type": LIVE_TEXT,
        "thread": thread,
        "frame_id": frame_id,
        "frame": label,
        "lane": lane,
        "seq": seq,
        "text": text,
        "activity": activity,
        "cut": 0,
        "done": done,
    }
    encoded = json.dumps(message)
    if len(encoded) <= MESSAGE_LIMIT:
        return encoded
    # The room the text has beside the rest (its `cut` written at its longest), and a tail cut
    # in proportion to what its characters cost as JSON until it fits: a step or two.
    room = MESSAGE_LIMIT - len(json.dumps({**message, "text": "", "cut": len(text)}))
    keep, size = len(text), len(json.dumps(text)) - 2
    while size > room and keep:
        keep = min(keep - 1, keep * room // size)
        size = len(json.dumps(text[len(text) - keep :])) - 2
    return json.dumps({**message, "text": text[len(text) - keep :], "cut": len(text) - keep})


def read_live(
    threads: list[str], known: dict[int, tuple[int, Any]]
) -> tuple[set[int], list[LiveFrame]]:
    """The frames of these threads that have live text, and those of them whose row is not
    as `known` (frame id: (seq, updated_at)), read whole. Blocking: call it in a thread."""
    current = LiveText.objects.filter(thread_id__in=threads).values_list(
        "frame_id", "seq", "updated_at"
    )
    present = set()
    changed = []
    for frame_id, seq, updated_at in current:
        present.add(frame_id)
        if known.get(frame_id) != (seq, updated_at):
            changed.append(frame_id)
    if not changed:
        return present, []
    rows = (
        LiveText.objects.filter(frame_id__in=changed)
        .select_related("frame")
        .only(
            "thread_id",
            "seq",
            "text",
            "activity",
            "updated_at",
            "frame__agent_type",
            "frame__agent_name",
            "frame__instance",
            "frame__lane",
        )
    )
    frames = []
    for row in rows:
        thread = str(row.thread_id)
        label, lane = row.frame.label, row.frame.lane_id
        message = live_message(thread, row.frame_id, label, lane, row.seq, row.text, row.activity)
        frames.append(
            LiveFrame(row.frame_id, thread, row.seq, row.updated_at, label, lane, message)
        )
    return present, frames
