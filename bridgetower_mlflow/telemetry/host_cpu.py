"""Host CPU of the training process and its data-loader workers, sampled off the training thread."""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger(__name__)


class HostCpuSampler:
    """Every `interval` s: main-process CPU %, summed worker CPU %, worker count, device samplers.

    100 % = one core busy. Metrics use the sampler's own step counter, like
    MLflow's system metrics; errors are warnings (telemetry fails soft).
    """

    KEYS = ("system/main_process_cpu_percentage", "system/dataloader_workers_cpu_percentage",
            "system/dataloader_workers_count", "system/process_cpu_percentage")

    def sample_keys(self) -> tuple[str, ...]:
        return self.KEYS

    def __init__(self, sink, interval: float = 2.0, device_samplers=(), pid: int | None = None):
        import psutil

        self.sink, self.interval = sink, interval
        self.device_samplers = list(device_samplers)
        self.process = psutil.Process(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="host-cpu-sampler", daemon=True)
        self.step = 0
        self.peak_workers = 0

    def start(self) -> "HostCpuSampler":
        main, workers, _ = self._cpu_seconds()
        self._last = (time.monotonic(), main, workers)
        self._thread.start()
        return self

    def _cpu_seconds(self) -> tuple[float, float, int]:
        """(main process CPU s, data-loader workers CPU s, live workers), cumulative.

        Workers restart every epoch unless persistent: finished ones are counted through the
        parent's children_user/children_system, live ones through their own times.
        """
        import psutil

        times = self.process.cpu_times()
        workers, count = times.children_user + times.children_system, 0
        for child in self.process.children(recursive=True):
            try:
                child_times = child.cpu_times()
            except psutil.Error:
                continue
            workers += child_times.user + child_times.system
            count += 1
        return times.user + times.system, workers, count

    def sample_once(self) -> dict[str, float]:
        now = time.monotonic()
        main, workers, count = self._cpu_seconds()
        last_t, last_main, last_workers = self._last
        elapsed = max(now - last_t, 1e-6)
        self._last = (now, main, max(workers, last_workers))
        self.peak_workers = max(self.peak_workers, count)
        main_pct = 100.0 * (main - last_main) / elapsed
        workers_pct = 100.0 * max(0.0, workers - last_workers) / elapsed
        values = {
            "system/main_process_cpu_percentage": main_pct,
            "system/dataloader_workers_cpu_percentage": workers_pct,
            "system/dataloader_workers_count": float(count),
            "system/process_cpu_percentage": main_pct + workers_pct,
        }
        for sampler in self.device_samplers:
            try:
                values.update(sampler.sample())
            except Exception as exc:  # noqa: BLE001 - a broken sensor must not stop training
                log.warning("device telemetry %s failed: %s", type(sampler).__name__, exc)
        return values

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                values = self.sample_once()
            except Exception as exc:  # noqa: BLE001
                log.warning("host CPU sampling failed: %s", exc)
                continue
            timestamp = int(time.time() * 1000)
            for key, value in values.items():
                self.sink.log_metric(key, value, self.step, timestamp)
            self.step += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for sampler in self.device_samplers:
            try:
                sampler.close()
            except Exception:  # noqa: BLE001
                pass
