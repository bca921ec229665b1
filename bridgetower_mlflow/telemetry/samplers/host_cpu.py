"""CPU of the training process and of its data-loader workers (100 % = one core busy)."""

from __future__ import annotations

import time


class HostCpuSampler:
    """main_process_cpu_percentage, dataloader_workers_cpu_percentage and _count, process_cpu_percentage."""

    def __init__(self, pid: int | None = None):
        import psutil

        self.process = psutil.Process(pid)
        self.peak_workers = 0
        self._last = None

    def start(self) -> None:
        main, workers, _ = self._cpu_seconds()
        self._last = (time.monotonic(), main, workers)

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

    def sample(self) -> dict[str, float]:
        if self._last is None:
            self.start()
        now = time.monotonic()
        main, workers, count = self._cpu_seconds()
        last_t, last_main, last_workers = self._last
        elapsed = max(now - last_t, 1e-6)
        self._last = (now, main, max(workers, last_workers))
        self.peak_workers = max(self.peak_workers, count)
        main_pct = 100.0 * (main - last_main) / elapsed
        workers_pct = 100.0 * max(0.0, workers - last_workers) / elapsed
        return {
            "main_process_cpu_percentage": main_pct,
            "dataloader_workers_cpu_percentage": workers_pct,
            "dataloader_workers_count": float(count),
            "process_cpu_percentage": main_pct + workers_pct,
        }

    def close(self) -> None:
        pass
