"""A wait for a file to be renamed into a folder, on Linux's inotify (through inotify_simple),
for the embedded broker's consumers (infra.broker): they sleep until a message appears
rather than listing the folder again and again."""

import os
from typing import Self

from inotify_simple import INotify, flags

# Messages are written to a hidden name and renamed into place (infra.broker.write_whole):
# the rename is the signal. Not the creation of the hidden file, which would wake every
# consumer once more for each message (and a message created in place under its own name
# would be the half-written file that infra.broker exists to avoid).
_ARRIVALS = flags.MOVED_TO
# The folder itself went away (the watch with it), or the kernel dropped events: wake, and
# let the caller poll and watch again.
_LOST = flags.IGNORED | flags.Q_OVERFLOW


class FolderWatch:
    def __init__(self, inotify: INotify) -> None:
        self._inotify = inotify
        self._pid = os.getpid()
        self._lost = False

    @classmethod
    def of(cls, folder: str | os.PathLike[str]) -> Self | None:
        """A watch on `folder`, or None where inotify cannot watch it (not Linux, a folder
        missing, the user's limit on watches reached): the caller polls instead."""
        try:
            inotify = INotify()
        except (OSError, AttributeError):  # AttributeError: a libc without inotify_init1
            return None
        try:
            inotify.add_watch(folder, _ARRIVALS)
        except OSError:
            inotify.close()
            return None
        return cls(inotify)

    def usable(self) -> bool:
        """Whether this watch still sees arrivals, in this process (a forked child shares the
        descriptor, and would take its parent's events)."""
        return not self._lost and self._pid == os.getpid() and not self._inotify.closed

    def wait(self, seconds: float) -> None:
        """Return once a file has arrived since the last wait, or after `seconds`. A wake may
        be spurious (a file the caller already took): the caller looks again either way."""
        for event in self._inotify.read(timeout=max(1, round(seconds * 1000))):
            if event.mask & _LOST:
                self._lost = True

    def close(self) -> None:
        self._inotify.close()
