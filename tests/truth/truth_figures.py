"""The truth observer's side outside the run: a /proc watcher of the process tree, its own FLOP count, the
figures its records give, and their comparison with what the run logged.

The records come from tests/truth/truth_observer.py (one JSON per training process). Every observed figure follows
the rule README states for the reported one (the window opens at the end of the last warmup step, or when the
train loader starts with no warmup, and closes when `Trainer.train` returns, less the evaluations inside it;
samples are summed over the ranks, seconds are the slowest rank's; the time-to-target clock runs from an attempt's
first train-loader iteration to the end of the evaluation that reached the target, a resume adding its earlier
attempt's clock up to the end of the checkpoint save it continued from), computed from those records and clocks
alone.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
RATE_TOLERANCE = 0.03  # rates and seconds: within 3 %
WAIT_TOLERANCE = 0.05  # loader wait fraction: within 0.05 absolute
EXACT = ("samples counted", "measured steps", "torch threads", "samples to target", "steps to target")


@dataclass(frozen=True)
class Window:
    """One rank's steady-state window as the observer saw it."""

    start: float
    end: float
    steps: int
    samples: int
    wait: float
    evals: float
    saves: float

    @property
    def seconds(self) -> float:
        """The window's wall time less the evaluations inside it (training's own seconds)."""
        return self.end - self.start - self.evals


def load_records(folder: Path) -> list[dict]:
    """Every training process's record, rank 0 first."""
    records = [json.loads(path.read_text()) for path in Path(folder).glob("*.json")]
    return sorted(records, key=lambda record: record["rank"])


def _inside(spans, start: float, end: float) -> float:
    return sum(b - a for a, b in spans if a >= start and b <= end)


def rank_window(record: dict, warmup: int) -> Window:
    """The window of one rank: its optimizer steps, batches, fetches, evaluations and saves on its own clock."""
    steps, (train_start, train_end) = record["steps"], record["train_calls"][0]
    start = steps[warmup - 1] if warmup else min(t for t in record["loader_iters"] if t >= train_start)
    samples = sum(rows for started, rows in record["batches"] if started > start)
    return Window(start=start, end=train_end, steps=sum(1 for t in steps if t > start), samples=samples,
                  wait=_inside(record["fetches"], start, train_end), evals=_inside(record["evals"], start, train_end),
                  saves=_inside(record["saves"], start, train_end))


def batches_per_step(record: dict) -> list[int]:
    """How many batches each optimizer step of the process ran (gradient accumulation as it happened)."""
    counts, steps = [], iter(record["steps"])
    boundary, count = next(steps, None), 0
    for started, _rows in record["batches"]:
        while boundary is not None and started > boundary:
            counts.append(count)
            boundary, count = next(steps, None), 0
        count += 1
    if boundary is not None:
        counts.append(count)
    return counts


class TreeWatcher:
    """Polls the CPU seconds of every process under `root` from /proc (utime + stime), on time.time()."""

    def __init__(self, root: int, interval: float = 0.05) -> None:
        self.root, self.interval = root, interval
        self.samples: dict[int, list[tuple[float, float]]] = {}
        self.started = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> TreeWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _descendants(self) -> list[int]:
        found, queue = [], [self.root]
        while queue:
            pid = queue.pop()
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{task}/children") as handle:
                        children = [int(child) for child in handle.read().split()]
                    found += children
                    queue += children
            except OSError:
                continue
        return found

    def _loop(self) -> None:
        while not self._stop.is_set():
            for pid in self._descendants():
                try:
                    with open(f"/proc/{pid}/stat") as handle:
                        fields = handle.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                self.samples.setdefault(pid, []).append((time.time(), (int(fields[11]) + int(fields[12])) / TICK))
            self._stop.wait(self.interval)

    def add_reaped(self, records: list[dict]) -> None:
        """Each reaped child's CPU seconds as its parent's wait4 counted them, as its last reading."""
        for record in records:
            for pid, instant, cpu in record["reaped"]:
                polls = self.samples.setdefault(pid, [])
                polls[:] = [p for p in polls if p[0] < instant] + [(instant, cpu)]

    def alive(self, pids, instant: float) -> int:
        """How many of `pids` had been seen by `instant` and were still seen after it."""
        return sum(1 for pid in pids if self.samples.get(pid)
                   and self.samples[pid][0][0] <= instant < self.samples[pid][-1][0])

    def cpu_at(self, pids, instant: float) -> float:
        """CPU seconds the processes `pids` had used by `instant` (linear between polls; 0 before the first)."""
        total = 0.0
        for pid in pids:
            polls = self.samples.get(pid, [])
            before = [p for p in polls if p[0] <= instant]
            after = [p for p in polls if p[0] > instant]
            if not before:
                continue
            if not after:
                total += before[-1][1]
                continue
            (t0, c0), (t1, c1) = before[-1], after[0]
            total += c0 + (c1 - c0) * (instant - t0) / (t1 - t0)
        return total


READ_BEFORE_STAMP = 0.1  # s: a monitor sample reads /proc, then its other collectors, then takes its timestamp


def workers_cpu_percent(watcher: TreeWatcher, worker_pids, series) -> tuple[float, float, float] | None:
    """(reported, observed, allowed difference) mean worker CPU % between the first and the last point of the
    run's series [(timestamp ms, value)]; None with fewer than two points.

    The reported total telescopes to the workers' CPU between the two reads. Each read lies up to
    READ_BEFORE_STAMP before its timestamp and truncates every live process's CPU to a 10 ms tick: what the
    workers ran in those moments, and a tick for each process alive then, is the allowed difference (or 3 %)."""
    points = sorted(series)
    if len(points) < 2:
        return None
    reported = sum(value * (t - t_prev) / 1000 for (t_prev, _), (t, value) in zip(points, points[1:]))
    first, last = points[0][0] / 1000, points[-1][0] / 1000
    observed = watcher.cpu_at(worker_pids, last) - watcher.cpu_at(worker_pids, first)
    blur = sum(watcher.cpu_at(worker_pids, t) - watcher.cpu_at(worker_pids, t - READ_BEFORE_STAMP)
               + watcher.alive(worker_pids, t) / TICK for t in (first, last))
    span = (last - first) / 100
    return reported / (last - first), observed / span, max(RATE_TOLERANCE * observed, blur) / span


def observed_flops_per_sample(first_batch: dict, model: str, seq_len: int, seed: int = 42) -> float:
    """Forward + backward of the run's first real batch (its token ids and mask; random pixels of its shape) on
    real CPU tensors, counted by FlopCounterMode, per row."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from bridgetower_mlflow.model.load import load_model

    loaded = load_model(model, seq_len, seed)
    rows, size = first_batch["input_ids"][0], loaded.image.size
    inputs = {"input_ids": torch.tensor(first_batch["input_ids_values"]),
              "attention_mask": torch.tensor(first_batch["attention_mask_values"]),
              "pixel_values": torch.rand(rows, 3, size, size)}
    loaded.model.train()
    with FlopCounterMode(display=False) as counter:
        loaded.model(**inputs, return_loss=True).loss.backward()
    return counter.get_total_flops() / rows


def observed_figures(records: list[dict], warmup: int, flops_per_sample: float | None = None) -> dict[str, float]:
    """The run's figures from the observer's records alone (every rank's window; the slowest one's seconds)."""
    windows = [rank_window(record, warmup) for record in records]
    slowest = max(windows, key=lambda window: window.seconds)
    samples = sum(window.samples for window in windows)
    figures = {
        "samples counted": samples, "measured steps": windows[0].steps, "steady seconds": slowest.seconds,
        "samples/s": samples / slowest.seconds, "per-device samples/s": samples / slowest.seconds / len(windows),
        "loader wait fraction": max(window.wait / window.seconds for window in windows),
        "eval seconds in window": slowest.evals, "save seconds in window": slowest.saves,
        "torch threads": records[0]["first_batch"]["torch_threads"],
    }
    if flops_per_sample:
        figures["TFLOP/s"] = flops_per_sample * figures["samples/s"] / 1e12
        figures["TFLOP/s per device"] = figures["TFLOP/s"] / len(windows)
    return figures


def _first_train_iteration(record: dict) -> float:
    start = record["train_starts"][0]
    return min(t for t in record["loader_iters"] if t >= start)


def _rows_before(record: dict, instant: float) -> int:
    return sum(rows for started, rows in record["batches"] if started < instant)


def observed_quality(attempts: list[list[dict]], reached) -> dict[str, float]:
    """Time, training time, samples and steps to the first evaluation `reached(metrics)` accepts, from the records
    of each attempt (rank 0 first; a resume's killed attempts before its last, each continued from its last
    checkpoint: its evaluations after that save were thrown away); {} when none reached it."""
    clock = evals = 0.0
    samples = 0
    for number, ranks in enumerate(attempts):
        main, start = ranks[0], _first_train_iteration(ranks[0])
        until = main["saves"][-1][1] if number < len(attempts) - 1 else float("inf")
        kept = [(index, step) for index, (step, metrics) in enumerate(main["eval_metrics"])
                if main["evals"][index][1] <= until and reached(metrics)]
        if kept:
            index, step = kept[0]
            eval_start, eval_end = main["evals"][index]
            clock += eval_end - start
            evals += _inside(main["evals"], start, eval_end)
            samples += sum(_rows_before(record, eval_start) for record in ranks)
            return {"time to target": clock, "training time to target": clock - evals,
                    "samples to target": samples, "steps to target": step}
        if until != float("inf"):
            clock += until - start
            evals += _inside(main["evals"], start, until)
            samples += sum(_rows_before(record, main["saves"][-1][0]) for record in ranks)
    return {}


REPORTED = {"samples counted": "train_measured_samples", "measured steps": "train_measured_steps",
            "steady seconds": "train_steady_state_seconds", "samples/s": "train_samples_per_second",
            "per-device samples/s": "train_samples_per_second_per_device",
            "loader wait fraction": "dataloader_wait_fraction", "eval seconds in window": "train_window_eval_seconds",
            "save seconds in window": "train_window_save_seconds", "TFLOP/s": "train_model_tflops_per_second",
            "TFLOP/s per device": "train_model_tflops_per_second_per_device",
            "time to target": "time_to_target_seconds", "training time to target": "time_to_target_train_seconds",
            "samples to target": "samples_to_target", "steps to target": "steps_to_target"}


def reported_figures(metrics: dict, tags: dict) -> dict[str, float]:
    """What the run logged, under the observer's figure names (the tag for torch threads)."""
    figures = {figure: metrics[key] for figure, key in REPORTED.items() if key in metrics}
    if "samples counted" not in figures and "samples/s" in figures:  # runs from before the samples metric
        figures["samples counted"] = figures["samples/s"] * figures["steady seconds"]
    if "software.torch_threads" in tags:
        figures["torch threads"] = int(tags["software.torch_threads"])
    return figures


@dataclass(frozen=True)
class Check:
    figure: str
    reported: float | None
    observed: float
    window: float = 0.0  # the observed window's seconds (what an in-window span is judged against)
    allowed: float = 0.0  # an absolute difference the measurement's own resolution allows (worker CPU)

    @property
    def ratio(self) -> float:
        if self.reported is None:
            return float("inf")
        return self.reported / self.observed if self.observed else (1.0 if self.reported == 0 else float("inf"))

    @property
    def ok(self) -> bool:
        if self.reported is None:
            return False
        if self.figure in EXACT:
            return round(self.reported, 6) == self.observed
        if self.figure == "loader wait fraction":
            return abs(self.reported - self.observed) <= WAIT_TOLERANCE
        if self.figure.endswith("in window"):  # a span inside the window: 3 % of it, or 1 % of the window
            return abs(self.reported - self.observed) <= max(RATE_TOLERANCE * self.observed, 0.01 * self.window)
        return abs(self.reported - self.observed) <= max(RATE_TOLERANCE * self.observed, self.allowed)

    def line(self) -> str:
        reported = "absent" if self.reported is None else f"{self.reported:.6g}"
        return f"{self.figure:24s} reported {reported:>12s}  observed {self.observed:12.6g}  " \
               f"ratio {self.ratio:8.4f}  {'ok' if self.ok else 'WRONG'}"


def compare(reported: dict, observed: dict) -> list[Check]:
    """One check per observed figure (a figure the run did not log is reported as absent, and wrong)."""
    window = observed.get("steady seconds", 0.0)
    return [Check(figure, reported.get(figure), value, window) for figure, value in observed.items()]
