"""The embedded broker: kombu's filesystem transport, with messages that appear whole.

Kombu writes a message straight into the folder its consumers poll, so a worker can read a
file before it has been written and die on the half-written JSON (celery/kombu#1551). This
channel writes to a hidden name first and renames it into place, which POSIX makes atomic;
the consumer's filter (`<name>.<queue>.msg`) never matches the hidden name.
"""

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".partial-{uuid.uuid4().hex}")
        try:
            with open(partial, "wb") as f:
                f.write(dumps(payload).encode())
            os.rename(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
