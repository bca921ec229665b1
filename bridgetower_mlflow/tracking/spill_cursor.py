"""The unsent part of a run's spill file, for MetricBuffer's sender: how many records wait there, where the
first of them starts, and reading them back a batch at a time. Every call is made under the buffer's lock.

Nothing read here stops the sender: a line that is not a whole record (garbage written into the file, a disk
that damaged it) is skipped and reported once; a file that cannot be opened is tried again after
SPILL_RETRY_S, its records waiting on disk meanwhile; a file removed by hand loses what it held, said once.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from .records import Record, from_line
from .spill import adopt, replace_whole

log = logging.getLogger(__name__)
SPILL_RETRY_S = 5.0  # an unreadable spill file is read again after this; records logged meanwhile still go


class SpillCursor:
    def __init__(self, path: Path, run_id: str) -> None:
        self.path = path
        self.waiting = adopt(path, run_id)  # records in the file not yet sent (a killed process's: backlog)
        self.position = 0  # byte offset of the first unsent line
        self.retry_at = self.failed_at = 0.0  # monotonic: no read before retry_at (the last one, at failed_at, failed)
        self._damage_seen = False

    def appended(self, count: int) -> None:
        self.waiting += count

    def readable_now(self) -> bool:
        return bool(self.waiting) and time.monotonic() >= self.retry_at

    def retry_now(self) -> None:
        self.retry_at = 0.0

    def failed_since(self, since: float) -> bool:
        """Records wait in a file whose read failed after `since` (monotonic) and is not tried again yet."""
        return bool(self.waiting) and self.failed_at >= since and time.monotonic() < self.retry_at

    def forget_if_removed(self) -> None:
        """A spill file deleted mid-run (by hand): its records are gone; count from an empty file again."""
        if self.waiting and not self.path.exists():  # else the sender reads a new file at an old offset
            log.warning("%s was removed while the run was going: %d records it held are lost", self.path, self.waiting)
            self.waiting = self.position = 0

    def read(self, limit: int) -> tuple[list[Record], int]:
        """Up to `limit` whole records from the first unsent line on, and the offset after them.

        OSError when the file cannot be read: it is read again after SPILL_RETRY_S. A file that ends
        before the records counted in it lost those (damaged on disk): it starts afresh.
        """
        try:
            rows, end = self._read(min(limit, self.waiting))
        except FileNotFoundError:  # removed between the look and the open
            self.forget_if_removed()
            return [], 0
        except OSError:
            self.failed_at = time.monotonic()
            self.retry_at = self.failed_at + SPILL_RETRY_S
            raise
        if not rows:
            log.warning("%s holds %d fewer whole records than were written to it: they are lost",
                        self.path, self.waiting)
            self.sent(self.waiting, end)
        return rows, end

    def _read(self, count: int) -> tuple[list[Record], int]:
        rows: list[Record] = []
        with open(self.path, "rb") as handle:
            handle.seek(self.position)
            while len(rows) < count:
                line = handle.readline()
                if not line:
                    break
                try:
                    rows.append(from_line(line.decode("utf-8"))[1])
                except ValueError:  # JSONDecodeError, UnicodeDecodeError: not one of the records to send
                    if line.strip() and not self._damage_seen:
                        log.warning("%s: a line is not a whole spill record (garbage, or a damaged disk); "
                                    "it is skipped", self.path)
                        self._damage_seen = True
            return rows, handle.tell()

    def sent(self, count: int, position: int) -> None:
        """`count` records up to byte `position` reached the store; an emptied file is removed."""
        self.waiting, self.position = max(self.waiting - count, 0), position
        if not self.waiting:
            self.path.unlink(missing_ok=True)
            self.position = 0

    def keep_only_unsent(self) -> None:
        """At the end: the file holds only the records never sent (else they re-send harmlessly)."""
        if not (self.position and self.path.exists()):
            return
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.position)
                rest = handle.read()
            replace_whole(self.path, rest.decode("utf-8", errors="replace"))
            self.position = 0
        except OSError:  # the sent records stay in front of the rest and re-send harmlessly
            pass
