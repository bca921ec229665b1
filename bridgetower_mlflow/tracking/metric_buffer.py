"""Metrics leave the training thread through this buffer: batched, retried, spilled, never lost.

`log_metric` only appends to a deque. A sender thread ships one batch per `flush_interval` with
`log_batch` (what tracking costs a run is then nearly independent of how often it logs); while the
tracking server is away it backs off, keeps a bounded number of metrics in memory and appends the
rest to a JSONL spill file, which it replays when the server returns. Whatever is still unsent when
the run ends stays in the spill file, uploadable with `bridgetower-mlflow upload-spill FILE`.
Resending a batch is safe: the SQL store skips metrics identical to ones it already holds.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from pathlib import Path

from ..contract import METRICS_PER_BATCH

log = logging.getLogger(__name__)


class MetricBuffer:
    def __init__(self, client, run_id: str, spill_path: Path, flush_interval: float = 5.0,
                 max_in_memory: int = 50_000, batch_size: int = METRICS_PER_BATCH):
        self.client, self.run_id, self.spill_path = client, run_id, Path(spill_path)
        self.flush_interval, self.max_in_memory, self.batch_size = flush_interval, max_in_memory, batch_size
        self._queue: deque = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._spilled_offset = 0  # lines of the spill file already sent
        self._spilled_lines = 0
        self._read_pos = 0  # byte offset of the first unsent spill line
        self.skip_upto: dict[str, int] = {}  # key -> last step already in the store (resumed runs)
        self.sent = 0
        self.failures = 0
        self.outage_seconds = 0.0
        self._thread = threading.Thread(target=self._run, name="mlflow-metric-sender", daemon=True)
        self._thread.start()

    # producer side (hot path: append only) ---------------------------------------------------
    def log_metric(self, key: str, value: float, step: int, timestamp: int | None = None) -> None:
        if self.skip_upto and step <= self.skip_upto.get(key, -1):
            return
        record = (key, float(value), int(timestamp or time.time() * 1000), int(step))
        with self._lock:
            self._queue.append(record)
            if len(self._queue) > self.max_in_memory:
                self._spill_locked(self.max_in_memory // 2)

    def log_metrics(self, metrics: dict, step: int) -> None:
        timestamp = int(time.time() * 1000)
        for key, value in metrics.items():
            self.log_metric(key, value, step, timestamp)

    # sender side ----------------------------------------------------------------------------
    def _spill_locked(self, count: int) -> None:
        """Move the oldest `count` queued metrics to the spill file (caller holds the lock)."""
        if count <= 0 or not self._queue:
            return
        self.spill_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.spill_path, "a", encoding="utf-8") as handle:
            for _ in range(min(count, len(self._queue))):
                key, value, ts, step = self._queue.popleft()
                handle.write(json.dumps({"run_id": self.run_id, "key": key, "value": value,
                                         "timestamp": ts, "step": step}) + "\n")
                self._spilled_lines += 1

    def _next_batch(self) -> tuple[list, str, int]:
        """Spilled (older) metrics go first so histories are replayed in order."""
        with self._lock:
            if self._spilled_offset < self._spilled_lines:
                rows = []
                with open(self.spill_path, encoding="utf-8") as handle:
                    handle.seek(self._read_pos)
                    while len(rows) < self.batch_size:
                        line = handle.readline()
                        if not line:
                            break
                        rows.append(json.loads(line))
                    position = handle.tell()
                return [(r["key"], r["value"], r["timestamp"], r["step"]) for r in rows], "spill", position
            return [self._queue[i] for i in range(min(self.batch_size, len(self._queue)))], "memory", 0

    def _send(self, batch: list) -> None:
        from mlflow.entities import Metric

        self.client.log_batch(self.run_id, metrics=[Metric(k, v, ts, s) for k, v, ts, s in batch],
                              synchronous=True)

    def _acknowledge(self, batch: list, origin: str, position: int) -> None:
        self.sent += len(batch)
        with self._lock:
            if origin == "memory":
                for _ in range(len(batch)):
                    self._queue.popleft()
                return
            self._spilled_offset += len(batch)
            self._read_pos = position
            if self._spilled_offset >= self._spilled_lines:
                self.spill_path.unlink(missing_ok=True)
                self._spilled_offset = self._spilled_lines = self._read_pos = 0

    def _run(self) -> None:
        backoff, down_since = self.flush_interval, None
        while True:
            batch, origin, position = self._next_batch()
            if not batch:
                if self._closing.is_set():
                    return
                self._wake.wait(self.flush_interval)
                self._wake.clear()
                continue
            try:
                self._send(batch)
            except Exception as exc:  # noqa: BLE001 - any failure means "try again later"
                self.failures += 1
                down_since = down_since or time.monotonic()
                if self.failures == 1 or self.failures % 20 == 0:
                    log.warning("tracking server unavailable (%s); buffering metrics", str(exc).splitlines()[0][:200])
                if self._closing.wait(backoff):
                    return
                backoff = min(backoff * 2, 15.0)
                continue
            if down_since is not None:
                self.outage_seconds += time.monotonic() - down_since
                log.warning("tracking server back; sending buffered metrics")
                down_since = None
            backoff = self.flush_interval
            self._acknowledge(batch, origin, position)
            if self.pending() < self.batch_size:
                # At most one batch per interval (a send costs about the same for 5 metrics as for
                # 500: ~8 ms of CPU on sqlite), unless a backlog is draining or flush() wakes us.
                self._wake.wait(self.flush_interval)
                self._wake.clear()

    def flush(self, timeout: float) -> bool:
        """Wait up to `timeout` s for everything to be sent; True when nothing is pending."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pending() == 0:
                return True
            self._wake.set()
            time.sleep(0.05)
        return self.pending() == 0

    def pending(self) -> int:
        with self._lock:
            return len(self._queue) + self._spilled_lines - self._spilled_offset

    def close(self, timeout: float) -> int:
        """Flush, stop the sender, spill the rest; return how many metrics stayed in the spill file."""
        self.flush(timeout)
        self._closing.set()
        self._wake.set()
        self._thread.join(timeout=30)
        with self._lock:
            self._spill_locked(len(self._queue))
            if self._spilled_offset and self.spill_path.exists():  # keep only what was never sent
                with open(self.spill_path, encoding="utf-8") as handle:
                    handle.seek(self._read_pos)
                    rest = handle.read()
                self.spill_path.write_text(rest, encoding="utf-8")
            return self._spilled_lines - self._spilled_offset
