"""What tracking costs a run: samples/s and CPU time per trained sample, everything on vs off.

Each trial is a fresh process training the tiny preset on the sample set through the public seam
`bridgetower_mlflow.train.flow.train(config, tracked=...)`:
- on: rank 0's path: the run, all params, per-step metrics through the MetricBuffer at every step
  (logging_steps=1), the system monitor (host CPU sampler, MLflow's collectors; 2 s), a sqlite store;
- off: `tracked=False`, the flow a non-main rank takes: no run, a NullSink, no monitor; the
  trainer, callbacks and measurement window are identical.
Inside each trial, at the two instants of the throughput window (a TrainerCallback added through transformers'
callback API: trainer_hooks.py), the process tree's CPU time is read from /proc (main process with every thread,
the data-loader workers live and reaped) and each thread's by name (`system-monitor`, `mlflow-run-sender`, ...);
every `MlflowClient.log_batch` is timed in the thread that calls it. CPU time per trained sample is the robust
figure on shared cores while torch has a core to itself: other jobs slow the wall clock, not the CPU a sample
takes (with torch on every busy core, OpenMP's spin-waits make both figures swing).
Trials alternate on/off (order flipped every pair), each `--torch-threads` setting in turn within a pair; no
pair starts that would end past `--budget` seconds (the first always runs). Last line: ratio=<median on/off
samples/s of the first setting>. Not a test.

    .venv/bin/python benchmarks/bench_tracking_overhead.py [--pairs 7] [--steps 80] [--torch-threads 1]
        [--budget 540] [--json FILE] [--from-json FILE] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TRACKING_THREADS = ("system-monitor", "mlflow-run-sender")
WARMUP_STEPS = 3


# -- inside a trial ---------------------------------------------------------------------------
class Probes:
    """CPU counters the trial fills; `window()` is what was spent between the window's two instants."""

    def __init__(self):
        self.counters: dict[str, list[float]] = {}  # part -> [calls, CPU seconds]
        self.marks: list[tuple[object, dict]] = []
        self.nices: dict[str, int] = {}

    def count_log_batch(self) -> None:
        """Every `MlflowClient.log_batch` (MLflow's public client: what the run buffer's sender and the run's
        params go through), timed on the CPU clock of the thread that calls it, counted by that thread's name."""
        from mlflow import MlflowClient

        log_batch = MlflowClient.log_batch

        def timed(*args, **kwargs):
            counter = self.counters.setdefault(f"log_batch in {threading.current_thread().name}", [0, 0.0])
            started = time.thread_time()
            try:
                return log_batch(*args, **kwargs)
            finally:
                counter[0] += 1
                counter[1] += time.thread_time() - started

        MlflowClient.log_batch = timed

    def mark(self) -> None:
        from process_cpu import snapshot, thread_nices

        self.nices.update(thread_nices())
        self.marks.append((snapshot(), {k: list(v) for k, v in self.counters.items()}))

    def window(self) -> dict:
        from process_cpu import difference

        (start, parts_start), (end, parts_end) = self.marks[0], self.marks[-1]
        spent = difference(start, end)
        zero = [0, 0.0]
        spent["parts"] = {part: [calls - parts_start.get(part, zero)[0], seconds - parts_start.get(part, zero)[1]]
                          for part, (calls, seconds) in parts_end.items()}
        spent["nice"] = self.nices
        return spent


def trial(mode: str, steps: int, batch: int, workers: int, folder: Path) -> dict:
    """One training run in this process; returns its steady-state figures and CPU times."""
    from trainer_hooks import at_train_start, window_marks

    from bridgetower_mlflow.config import build_train_config
    from bridgetower_mlflow.contract import MEASURED_SAMPLES_METRIC, THROUGHPUT_METRIC, WAIT_METRIC
    from bridgetower_mlflow.train.flow import train

    probes = Probes()
    probes.count_log_batch()
    at_train_start(lambda trainer: trainer.add_callback(window_marks(WARMUP_STEPS, probes.mark)))
    config = build_train_config(model="tiny", max_steps=steps, logging_steps=1, per_device_train_batch_size=batch,
                                dataloader_num_workers=workers, log_model=False, output_dir=str(folder / "out"),
                                experiment_name="bench-tracking-overhead", max_eval_samples=16,
                                throughput_warmup_steps=WARMUP_STEPS)
    result = train(config, tracked=mode == "on")
    return {"mode": mode, "samples_per_second": result.metrics[THROUGHPUT_METRIC],
            "samples": result.metrics[MEASURED_SAMPLES_METRIC], "wait": result.metrics[WAIT_METRIC],
            "cpu": probes.window()}


# -- the driver -------------------------------------------------------------------------------
def run_trial(mode: str, threads: int, opts, folder: Path) -> dict:
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}"}
    if opts.cache:
        env["BRIDGETOWER_MLFLOW_CACHE"] = str(opts.cache)
    env.pop("OMP_NUM_THREADS", None)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    cmd = [sys.executable, __file__, "--trial", mode, "--steps", str(opts.steps), "--batch", str(opts.batch),
           "--workers", str(opts.workers), "--folder", str(folder)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise SystemExit(f"trial {mode} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def warm_store(folder: Path) -> None:
    """Create the sqlite schema once (~2 s), so no trial pays it."""
    from mlflow import MlflowClient

    MlflowClient(f"sqlite:///{folder / 'mlflow.db'}").search_experiments()


def per_sample_ms(got: dict) -> float:
    return 1000 * got["cpu"]["tree"] / got["samples"]


def tracking_seconds(got: dict) -> float:
    return sum(got["cpu"]["threads"].get(name, 0.0) for name in TRACKING_THREADS)


def span(values: list[float], digits: int = 3) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def summary(threads: int, pairs: list[dict]) -> list[str]:
    """The setting's table (markdown): the pair figures, then where the "on" trials' CPU went."""
    label = f"torch threads {threads or 'default (every core)'}"
    on, off = [p["on"] for p in pairs], [p["off"] for p in pairs]
    rows = [f"{label}, {len(pairs)} pairs; medians (min-max)", "",
            "| figure | on | off | on/off per pair |", "|---|---|---|---|",
            f"| samples/s | {span([g['samples_per_second'] for g in on], 2)} | "
            f"{span([g['samples_per_second'] for g in off], 2)} | "
            f"{span([p['on']['samples_per_second'] / p['off']['samples_per_second'] for p in pairs])} |",
            f"| process tree CPU ms per sample | {span([per_sample_ms(g) for g in on], 1)} | "
            f"{span([per_sample_ms(g) for g in off], 1)} | "
            f"{span([per_sample_ms(p['on']) / per_sample_ms(p['off']) for p in pairs])} |"]
    for part, label_ in (("main", "main process (every thread)"), ("workers", "data-loader workers")):
        rows.append(f"| {label_} CPU ms per sample | {span([1000 * g['cpu'][part] / g['samples'] for g in on], 1)} | "
                    f"{span([1000 * g['cpu'][part] / g['samples'] for g in off], 1)} | |")
    main_thread = {id(g): 1000 * g["cpu"]["threads"].get("MainThread", 0.0) / g["samples"] for g in on + off}
    rows.append(f"| the main thread (training) CPU ms per sample | {span([main_thread[id(g)] for g in on], 1)} | "
                f"{span([main_thread[id(g)] for g in off], 1)} | "
                f"{span([main_thread[id(p['on'])] / main_thread[id(p['off'])] for p in pairs])} |")
    busy = {mode: [g["cpu"]["tree"] / g["cpu"]["wall"] for g in trials] for mode, trials in (("on", on), ("off", off))}
    rows.append(f"| process tree CPU / wall time (cores it got) | {span(busy['on'], 2)} | {span(busy['off'], 2)} | |")
    shares = [100 * tracking_seconds(g) / g["cpu"]["tree"] for g in on]
    rows.append(f"| **tracking threads' CPU / tree CPU** | **{span(shares, 2)} %** | – | |")
    core = [100 * tracking_seconds(g) / g["cpu"]["wall"] for g in on]
    rows.append(f"| tracking threads' CPU / wall time (share of one core) | {span(core, 2)} % | – | |")
    rows += ["", "| \"on\" trials: thread or part | CPU s per window | µs per sample | % of the tree's CPU |",
             "|---|---|---|---|"]
    names = sorted({name for g in on for name in g["cpu"]["threads"]},
                   key=lambda name: -statistics.median(g["cpu"]["threads"].get(name, 0.0) for g in on))
    parts = sorted({part for g in on for part in g["cpu"]["parts"]})

    def row(title: str, seconds: list[float]) -> str:
        per_sample = statistics.median(1e6 * s / g["samples"] for s, g in zip(seconds, on))
        share = statistics.median(100 * s / g["cpu"]["tree"] for s, g in zip(seconds, on))
        return f"| {title} | {statistics.median(seconds):.3f} | {per_sample:.1f} | {share:.2f} |"

    for name in names:
        seconds = [g["cpu"]["threads"].get(name, 0.0) for g in on]
        if statistics.median(seconds) < 0.0005 and name not in TRACKING_THREADS:
            continue
        nices = sorted({g["cpu"]["nice"].get(name) for g in on} - {None})
        rows.append(row(f"thread `{name}`" + (f" (nice {', '.join(map(str, nices))})" if nices else ""), seconds))
        rows += [row(f"&nbsp;&nbsp;of it `{part.split(' in ')[0]}`",
                     [g["cpu"]["parts"].get(part, [0, 0.0])[1] for g in on])
                 for part in parts if part.endswith(f" in {name}")
                 and any(g["cpu"]["parts"].get(part, [0, 0.0])[0] for g in on)]
    rows.append(row("data-loader workers", [g["cpu"]["workers"] for g in on]))
    calls = {part: statistics.median(g["cpu"]["parts"].get(part, [0, 0.0])[0] for g in on) for part in parts}
    rows += ["", "calls per window (median): " + ", ".join(f"{part} {count:g}" for part, count in calls.items()),
             f"window: {statistics.median(g['cpu']['wall'] for g in on + off):.1f} s wall, "
             f"{statistics.median(g['samples'] for g in on + off):g} samples"]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--torch-threads", default="1",
                        help="comma-separated OMP/torch threads per trial, each setting in every pair (0: torch's "
                             "default, every core); e.g. 0,1. The ratio line is the first setting's. Default 1: "
                             "a core left free, the setting a shared machine can resolve")
    parser.add_argument("--budget", type=float, default=540, help="seconds: no pair starts that would end later")
    parser.add_argument("--cache", help="the project's cache folder for the trials (default: the project's own)")
    parser.add_argument("--json", help="also write every trial's figures to this file")
    parser.add_argument("--from-json", help="print the tables of a --json file instead of measuring")
    parser.add_argument("--smoke", action="store_true", help="one pair of 4-step trials: does it still run?")
    parser.add_argument("--trial", choices=["on", "off"], help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.smoke:
        opts.pairs, opts.steps, opts.torch_threads = 1, WARMUP_STEPS + 1, "1"
    if opts.trial:
        print("RESULT " + json.dumps(trial(opts.trial, opts.steps, opts.batch, opts.workers, Path(opts.folder))))
        return
    if opts.from_json:
        saved = json.loads(Path(opts.from_json).read_text(encoding="utf-8"))
    else:
        saved = measure(opts)
        if opts.json:
            Path(opts.json).write_text(json.dumps(saved), encoding="utf-8")
    print("\n" + saved["conditions"] + "\n")
    results = {int(threads): pairs for threads, pairs in saved["results"].items()}
    for threads, pairs in results.items():
        print("\n".join(summary(threads, pairs)) + "\n")
    first = [p["on"]["samples_per_second"] / p["off"]["samples_per_second"] for p in next(iter(results.values()))]
    print(f"ratio={statistics.median(first):.3f}")


def measure(opts) -> dict:
    """Every pair of every setting: {"conditions": one line, "results": {threads: [{"on": .., "off": ..}]}}."""
    settings = [int(value) for value in opts.torch_threads.split(",")]
    load, started = os.getloadavg(), time.monotonic()
    results: dict[int, list[dict]] = {threads: [] for threads in settings}
    with tempfile.TemporaryDirectory(prefix="bench-tracking-") as tmp:
        folder = Path(tmp)
        warm_store(folder)
        for pair in range(opts.pairs):
            spent = time.monotonic() - started
            if pair and spent * (pair + 1) / pair > opts.budget:
                print(f"{pair} pairs in {spent:.0f} s: the next would end past the {opts.budget:.0f} s budget")
                break
            order = ("on", "off") if pair % 2 == 0 else ("off", "on")
            for threads in settings:
                got = {mode: run_trial(mode, threads, opts, folder) for mode in order}
                results[threads].append(got)
                on, off = got["on"], got["off"]
                print(f"pair {pair + 1}, torch threads {threads or 'default'}: samples/s on "
                      f"{on['samples_per_second']:.2f} off {off['samples_per_second']:.2f} "
                      f"({on['samples_per_second'] / off['samples_per_second']:.3f}); CPU ms/sample on "
                      f"{per_sample_ms(on):.1f} off {per_sample_ms(off):.1f} "
                      f"({per_sample_ms(on) / per_sample_ms(off):.3f}); tracking threads "
                      f"{100 * tracking_seconds(on) / on['cpu']['tree']:.2f} % of the tree's CPU, "
                      f"{100 * tracking_seconds(on) / on['cpu']['wall']:.2f} % of a core", flush=True)
    conditions = (f"tiny preset, batch {opts.batch}, {opts.steps} steps ({WARMUP_STEPS} warmup), logging every step, "
                  f"{opts.workers} loader worker(s), {os.cpu_count()} cores; load average before {load[0]:.1f} / "
                  f"{load[1]:.1f} / {load[2]:.1f}, after {' / '.join(f'{v:.1f}' for v in os.getloadavg())}; "
                  f"{(time.monotonic() - started) / 60:.1f} min")
    return {"conditions": conditions, "results": results}


if __name__ == "__main__":
    main()
