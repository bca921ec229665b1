"""Everything a run logs after it starts leaves through this buffer: batched, retried, spilled, never lost.

`log_metric`, `log_tags` and `log_status` only append to a deque. A sender thread ships one batch per
`flush_interval` (what tracking costs a run is then nearly independent of how often it logs); while
the tracking server is away it backs off, keeps a bounded number of records in memory and appends the
rest to a JSONL spill file, which it replays first when the server returns. `persist` writes every
queued record to that file (a checkpoint calls it, so a SIGKILL loses nothing the checkpoint covers).
Spill writes are whole lines flushed to disk (tracking.spill); records a full disk refuses stay queued.
What is still unsent when the run ends stays in the spill file, for `bridgetower-mlflow upload-spill`
or the next run on this machine. Re-sending is safe: the store skips identical metrics; tags and the
status are idempotent.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from ..contract import METRICS_PER_BATCH
from ..disk_space import disk_errno, full_line
from ..redact import first_line
from ..telemetry.system.thread_names import name_this_thread
from .records import MetricRecord, Record, StatusRecord, TagsRecord, send_records, to_line
from .spill import append_whole
from .spill_cursor import SpillCursor

log = logging.getLogger(__name__)


class MetricBuffer:
    def __init__(self, client: Any, run_id: str, spill_path: Path, flush_interval: float = 5.0,
                 max_in_memory: int = 50_000, batch_size: int = METRICS_PER_BATCH) -> None:
        self.client, self.run_id, self.spill_path = client, run_id, Path(spill_path)
        self.flush_interval, self.max_in_memory, self.batch_size = flush_interval, max_in_memory, batch_size
        self._queue: deque[Record] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._idle = threading.Event()  # set while the sender sleeps until its next interval, nothing in flight
        self.skip_upto: dict[str, int] = {}  # key -> last step already in the store (resumed runs)
        self.sent = self.failures = self.faults = 0  # faults: errors the sender met and lived through
        self.outage_seconds = 0.0
        self._overflow_at = max_in_memory  # queue length that triggers a spill; raised while the disk refuses
        self._refused: OSError | None = None  # why the last spill write failed (warned once per streak)
        self.loss_line = ""  # set by close() when records could be neither sent nor spilled for lack of disk
        self._spill = SpillCursor(self.spill_path, run_id)  # this run's own leftovers (a killed process): backlog
        self._thread = threading.Thread(target=self._run, name="mlflow-run-sender", daemon=True)
        self._thread.start()

    # producer side (hot path: append only) ---------------------------------------------------
    def _append(self, record: Record) -> None:
        with self._lock:
            self._queue.append(record)
            if len(self._queue) > self._overflow_at and not self._spill_locked(
                    len(self._queue) - self.max_in_memory // 2):
                self._overflow_at = len(self._queue) + self.max_in_memory // 2  # not on every append meanwhile

    def skip_logged(self, last_steps: dict[str, int]) -> None:
        """A resumed run: steps up to each key's last stored one are not logged again."""
        self.skip_upto.update(last_steps)

    def log_metric(self, key: str, value: float, step: int, timestamp: int | None = None) -> None:
        if self.skip_upto and step <= self.skip_upto.get(key, -1):
            return
        self._append(MetricRecord(key, float(value), int(timestamp or time.time() * 1000), int(step)))

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        timestamp = int(time.time() * 1000)
        for key, value in metrics.items():
            self.log_metric(key, value, step, timestamp)

    def log_tags(self, tags: dict[str, str]) -> None:
        self._append(TagsRecord(dict(tags)))

    def log_status(self, status: str) -> None:
        self._append(StatusRecord(status, int(time.time() * 1000)))

    def persist(self) -> None:
        """Everything queued goes to the spill file, flushed to disk, before the caller moves on."""
        with self._lock:
            self._spill_locked(len(self._queue))

    # sender side ----------------------------------------------------------------------------
    def _spill_locked(self, count: int) -> bool:
        """Move the oldest `count` queued records to the spill file, on disk (caller holds the lock).

        False when the disk refused them: they stay queued, the file as it was.
        """
        count = min(count, len(self._queue))
        if count <= 0:
            return True
        self._spill.forget_if_removed()
        try:
            self.spill_path.parent.mkdir(parents=True, exist_ok=True)
            lines = "".join(to_line(self.run_id, record) for record in itertools.islice(self._queue, count))
            append_whole(self.spill_path, lines)
        except OSError as exc:
            if self._refused is None:
                log.warning("cannot write %s (%s): %d records wait in memory until they are written or sent",
                            self.spill_path, exc.strerror or exc, len(self._queue))
            self._refused = exc
            return False
        for _ in range(count):
            self._queue.popleft()
        self._spill.appended(count)
        self._overflow_at, self._refused = self.max_in_memory, None
        return True

    def _next_batch(self) -> tuple[list[Record], int, int]:
        """(records, how many of them came from the spill file, the file offset after those).

        Spilled (older) records go first so histories, tags and the status arrive in order; a batch that drains
        the file goes on with what was logged since (a checkpoint's persist must not hold the live steps back an
        interval). While the spill file cannot be read, what is logged meanwhile goes (its records wait on disk)."""
        with self._lock:
            self._spill.forget_if_removed()
            rows: list[Record] = []
            position = 0
            if self._spill.readable_now():
                try:
                    rows, position = self._spill.read(self.batch_size)
                except OSError as exc:
                    self._fault(exc, f"cannot read {self.spill_path}; its {self._spill.waiting} records wait there")
                if rows and len(rows) < self._spill.waiting:
                    return rows, len(rows), position
            room = min(self.batch_size - len(rows), len(self._queue))
            return rows + [self._queue[i] for i in range(room)], len(rows), position

    def _acknowledge(self, batch: list[Record], spilled: int, position: int) -> None:
        self.sent += sum(1 for record in batch if isinstance(record, MetricRecord))
        with self._lock:
            if spilled:
                self._spill.sent(spilled, position)
            # persist() or an overflow may have moved (part of) the rest to the spill file while it was in
            # flight: drop only what is still at the head; the spilled copy re-sends harmlessly
            for record in batch[spilled:]:
                if not self._queue or self._queue[0] is not record:
                    break
                self._queue.popleft()

    def _run(self) -> None:
        """The sender, supervised: an error it did not expect is reported once and sending goes on."""
        name_this_thread()
        while True:
            try:
                return self._send_until_closed()
            except Exception as exc:  # noqa: BLE001 - a dead sender would strand every record logged after
                self._fault(exc, "the sender goes on")
                if self._closing.wait(self.flush_interval):
                    return

    def _fault(self, exc: Exception, outcome: str) -> None:
        self.faults += 1
        if self.faults == 1:
            log.warning("tracking: %s (%s); %s", type(exc).__name__, first_line(exc), outcome)

    def _send_until_closed(self) -> None:
        backoff, down_since = self.flush_interval, None
        while True:
            batch, spilled, position = self._next_batch()
            if not batch:
                if self._closing.is_set():
                    return
                self._sleep()
                continue
            try:
                send_records(self.client, self.run_id, batch)
            except Exception as exc:  # noqa: BLE001 - any failure means "try again later"
                self.failures += 1
                down_since = down_since or time.monotonic()
                if self.failures == 1 or self.failures % 20 == 0:
                    log.warning("tracking server unavailable (%s); buffering", first_line(exc))
                if self._closing.wait(backoff):
                    return
                backoff = min(backoff * 2, 15.0)
                continue
            if down_since is not None:
                self.outage_seconds += time.monotonic() - down_since
                log.warning("tracking server back; sending what was buffered")
                down_since = None
            backoff = self.flush_interval
            self._acknowledge(batch, spilled, position)
            if self.pending() < self.batch_size:
                # At most one batch per interval (a send costs about the same for 5 metrics as for
                # 500: ~8 ms of CPU on sqlite), unless a backlog is draining or flush() wakes us.
                self._sleep()

    def _sleep(self) -> None:
        self._idle.set()
        self._wake.wait(self.flush_interval)
        self._idle.clear()
        self._wake.clear()

    def wait_until_idle(self, timeout: float) -> bool:
        """Wait up to `timeout` s until the sender has looked for records and sleeps until its next interval
        (or a flush) with nothing in flight; True when it does. Records queued or spilled meanwhile wait
        for that interval."""
        return self._idle.wait(timeout)

    def flush(self, timeout: float) -> bool:
        """Wait up to `timeout` s for everything to be sent; True when nothing is pending."""
        started = time.monotonic()
        deadline = started + timeout
        with self._lock:
            self._spill.retry_now()  # a spill file that could not be read is tried once more now
        while time.monotonic() < deadline:
            if self.pending() == 0:
                return True
            if self._nothing_to_send(since=started):
                return False
            self._wake.set()
            time.sleep(0.05)
        return self.pending() == 0

    def _nothing_to_send(self, since: float) -> bool:
        """Waiting cannot help: the sender is gone, or only the records of a spill file it failed to read
        again (after `since`) are left."""
        with self._lock:
            unreadable = not self._queue and self._spill.failed_since(since)
        return unreadable or not self._thread.is_alive()

    def pending(self) -> int:
        with self._lock:
            return len(self._queue) + self._spill.waiting

    def close(self, timeout: float) -> int:
        """Flush, stop the sender, spill the rest; return how many records stayed in the spill file."""
        self.flush(timeout)
        self._closing.set()
        self._wake.set()
        self._thread.join(timeout=5)
        with self._lock:
            if not self._spill_locked(len(self._queue)):
                log.warning("%d records could not be written to %s and end with this process",
                            len(self._queue), self.spill_path)
                if self._refused is not None and disk_errno(self._refused) is not None:
                    self.loss_line = full_line("tracking", f"the metric spill ({len(self._queue)} records not sent)",
                                               self.spill_path.parent, code=disk_errno(self._refused))
            self._spill.keep_only_unsent()
            return self._spill.waiting
