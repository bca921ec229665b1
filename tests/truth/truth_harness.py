"""The truth harness: real `bridgetower-mlflow train` runs watched by the observer, their figures side by side.

Each configuration is one real CLI run (CPU, tiny preset, a few steps) with tests/fakes/truth on PYTHONPATH: the
observer records every training process from inside the libraries, a /proc watcher follows the process tree from
outside, and `checks` holds each figure the run logged against the observer's own. One run covers several cells
of the matrix (see CONFIGS); a resume is a first attempt SIGKILLed after its checkpoint at step 6, then resumed.
Used by tests/truth/test_truth.py and benchmarks/bench_truth.py.
"""

from __future__ import annotations

import dataclasses
import operator
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.truth.truth_figures import (
    Check,
    TreeWatcher,
    batches_per_step,
    compare,
    load_records,
    observed_figures,
    observed_flops_per_sample,
    observed_quality,
    reported_figures,
    workers_cpu_percent,
)
from tests.truth.truth_observer import HOLD_AT_ENV, HOLD_FILE_ENV

TESTS = Path(__file__).resolve().parents[1]  # tests/, which holds fakes/
OBSERVER_PATH = TESTS / "fakes" / "truth"
BIN = Path(sys.executable).parent
SEQ_LEN = 32
# optimum-habana's CPU mode: every HPU-only setting off (as tests/accelerators/test_gaudi_stack.py runs the real
# GaudiTrainer)
HPU_ONLY_OFF = "--use_habana false --use_cpu true --use_lazy_mode false --use_hpu_graphs_for_inference false " \
               "--torch_compile false"


@dataclass(frozen=True)
class Config:
    """One observed run: its CLI options, the warmup, and what else it needs."""

    name: str
    options: tuple[str, ...]
    warmup: int
    env: dict = field(default_factory=dict)
    killed_at: int = 0  # > 0: a resume; an attempt with the same options is killed at this step first
    gaudi: bool = False

    @property
    def target(self) -> str:
        """The --target the run was given ("" for none)."""
        options = list(self.options)
        return options[options.index("--target") + 1] if "--target" in options else ""

    def with_target(self, target: str) -> Config:
        """The same run with another --target."""
        options = list(self.options)
        options[options.index("--target") + 1] = target
        return dataclasses.replace(self, options=tuple(options))


def _options(batch: int, warmup: int, workers: int, hf_args: str, *more: str) -> tuple[str, ...]:
    return ("--per-device-train-batch-size", str(batch), "--throughput-warmup-steps", str(warmup),
            "--dataloader-num-workers", str(workers), "--hf-args", hf_args, "--max-seq-length", str(SEQ_LEN),
            "--logging-steps", "2", "--log-model", "false", *more)


# 240 training rows. GA 2 at batch 16: 15 batches an epoch, so its 8th step runs one batch (the remainder) and
# step 9 starts the second epoch; evaluations at steps 5 and 10, checkpoints at 6 and 10, all inside the window.
# A target every evaluation reaches, training on past it: the time to target is the first evaluation's (the resume
# aims at one only its second evaluation reaches); learning rate 1e-3, so eval_loss moves between the two.
EVERY_EVALUATION = "eval_loss<=1000000.0"
GA_REMAINDER = _options(16, 0, 2, "--gradient_accumulation_steps 2", "--eval-steps", "5", "--target",
                        EVERY_EVALUATION, "--stop-at-target", "false", "--learning-rate", "1e-3", "--save-steps", "6",
                        "--max-steps", "10")
ONE_THREAD = {"OMP_NUM_THREADS": "1"}  # set by the user: kept (two threads on a loaded 2-core host crawl)
CONFIGS = {
    # GA 2 with a remainder, an epoch boundary, an evaluation and a save inside the window, 2 workers, warmup 0,
    # max_steps
    "ga-remainder": Config("ga-remainder", GA_REMAINDER, 0, ONE_THREAD),
    # the same killed at step 7 and resumed from its checkpoint at step 6 (inside the window): steps 7-10, the
    # remainder step and the epoch boundary included
    "resume": Config("resume", GA_REMAINDER, 0, ONE_THREAD, killed_at=7),
    # GA 2 without a remainder (batch 25 without drop_last: 9 batches of 25 and one of 15 an epoch), epochs not
    # max_steps, warmup 3, no workers
    "epochs": Config("epochs", _options(25, 3, 0, "--gradient_accumulation_steps 2 --dataloader_drop_last false",
                                        "--num-train-epochs", "2"), 3, ONE_THREAD),
    # two ranks (torchrun), GA 1, warmup 2; OMP_NUM_THREADS left unset: each rank takes its share of the cores;
    # evaluations every 4 steps and a target the first reaches: training stops at step 4 of 8 (not inflated)
    "two-ranks": Config("two-ranks", _options(8, 2, 1, "", "--devices", "2", "--max-steps", "8", "--eval-steps", "4",
                                              "--target", EVERY_EVALUATION), 2),
    # the real GaudiTrainer (optimum-habana 1.21.2, CPU mode) in .venv-gaudi: GA with a remainder, then a resume
    "gaudi-ga": Config("gaudi-ga", ("--accel", "gaudi2", *_options(
        16, 0, 2, f"{HPU_ONLY_OFF} --gradient_accumulation_steps 2", "--save-steps", "6", "--max-steps", "10",
        "--eval-steps", "5", "--target", EVERY_EVALUATION, "--stop-at-target", "false")), 0, ONE_THREAD, gaudi=True),
}
CONFIGS["gaudi-resume"] = Config("gaudi-resume", CONFIGS["gaudi-ga"].options, 0, ONE_THREAD, killed_at=7, gaudi=True)


@dataclass(frozen=True)
class Observed:
    """One observed run: what it logged, what the observer recorded, and the checks."""

    config: Config
    metrics: dict
    tags: dict
    records: list
    checks: list[Check]
    stderr: str
    params: dict = field(default_factory=dict)
    run_id: str = ""

    def wrong(self) -> list[str]:
        return [check.line() for check in self.checks if not check.ok]

    def batches_per_step(self, rank: int = 0) -> list[int]:
        return batches_per_step(self.records[rank])


def _env(config: Config, folder: Path, records: Path) -> dict[str, str]:
    paths = [str(OBSERVER_PATH)]
    if config.gaudi:
        paths.append(str(TESTS / "fakes" / "habana_bridge"))
    paths += filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))  # a product checkout to run instead
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    return {**env, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": os.pathsep.join(paths),
            "BRIDGETOWER_TRUTH_DIR": str(records), "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL": "0.5",
            "MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}", "HF_HUB_OFFLINE": "1",
            **({"FAKE_HPU_COUNT": "1"} if config.gaudi else {}), **config.env}


def _command(config: Config, folder: Path) -> list[str]:
    resume = ("--resume", "true") if config.killed_at else ()
    return [str(BIN / "bridgetower-mlflow"), "train", *config.options, *resume, "--output-dir",
            str(folder / "outputs"), "--experiment-name", "truth"]


def _killed_attempt(config: Config, folder: Path, timeout: float) -> None:
    """The first attempt of a resume: held at step `killed_at` once its checkpoint-6 is complete, then SIGKILLed."""
    hold, records = folder / "hold", folder / "killed-records"
    hold.write_text("")
    records.mkdir(parents=True, exist_ok=True)
    env = {**_env(config, folder, records), HOLD_FILE_ENV: str(hold), HOLD_AT_ENV: str(config.killed_at)}
    command = [part for part in _command(config, folder) if part not in ("--resume", "true")]
    with open(folder / "killed.log", "w") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=folder,
                                   start_new_session=True)
    deadline = time.monotonic() + timeout
    while not list(folder.glob("outputs/*/checkpoint-6/trainer_state.json")) or not _held(records, config):
        if process.poll() is not None or time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            raise AssertionError(f"{config.name}: the first attempt ended or hung before its checkpoint at step 6 "
                                 f"and step {config.killed_at}: {(folder / 'killed.log').read_text()[-3000:]}")
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _held(records: Path, config: Config) -> bool:
    """True once the attempt's optimizer step `killed_at` ended and holds (the observer writes `held` then)."""
    return (records / "held").exists()


def run_observed(config: Config, root: Path, timeout: float = 900) -> Observed:
    """Train `config` under the observer in `root/<name>` (a resume after its killed first attempt); check its
    figures against the observer's."""
    folder, records = root / config.name, root / f"{config.name}-records"
    for path in (folder, records):
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
    if config.killed_at:
        _killed_attempt(config, folder, timeout)
    with open(folder / f"{config.name}.log", "w+") as log:
        process = subprocess.Popen(_command(config, folder), env=_env(config, folder, records), stdout=log,
                                   stderr=subprocess.STDOUT, cwd=folder)
        with TreeWatcher(process.pid) as watcher:
            code = process.wait(timeout=timeout)
        log.seek(0)
        output = log.read()
    if code != 0:
        raise AssertionError(f"{config.name}: train exited {code}:\n{output[-3000:]}")
    found = load_records(records)
    watcher.add_reaped(found)
    return _observed(config, folder, found, watcher, output)


def _mfu_figures(metrics: dict, observed: dict, ranks: int) -> tuple[dict, dict]:
    """(reported, observed) MFU against the measured achievable rate, where the run logs one: the observer's
    TFLOP/s a device over the rate the run measured (the observer does not measure the rate itself)."""
    if "train_mfu_achievable" not in metrics or "device_achievable_tflops" not in metrics:
        return {}, {}
    return ({"MFU (achievable)": metrics["train_mfu_achievable"]},
            {"MFU (achievable)": observed["TFLOP/s"] / ranks / metrics["device_achievable_tflops"]})


def reached_by(target: str):
    """The observer's own reading of a target: metrics -> reached (no product code)."""
    metric, comparison, value = re.fullmatch(r"(\w+)(<=|>=|<|>)(.+)", target).groups()
    compare_with = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}[comparison]
    return lambda metrics: metric in metrics and compare_with(metrics[metric], float(value))


def _observed(config: Config, folder: Path, records: list, watcher: TreeWatcher, output: str) -> Observed:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("truth")
    (run,) = client.search_runs([experiment.experiment_id])
    metrics, tags = run.data.metrics, run.data.tags
    flops = observed_flops_per_sample(records[0]["first_batch"], "tiny", SEQ_LEN)
    observed = observed_figures(records, config.warmup, flops)
    if tags.get("accelerator") != "cpu":  # the CPU adapter's tag: other adapters do not set torch's threads
        observed.pop("torch threads")
    reported = reported_figures(metrics, tags)
    series = [(m.timestamp, m.value) for m in client.get_metric_history(run.info.run_id,
                                                                        "system/dataloader_workers_cpu_percentage")]
    series = [(t, value) for t, value in series if t / 1000 >= watcher.started]  # a resume's own samples
    workers = sorted({pid for record in records for pid in record["worker_pids"]})
    cpu = workers_cpu_percent(watcher, workers, series) if workers else None
    mfu_reported, mfu_observed = _mfu_figures(metrics, observed, len(records))
    reported.update(mfu_reported)
    observed.update(mfu_observed)
    if config.target:
        attempts = [load_records(folder / "killed-records")] if config.killed_at else []
        observed.update(observed_quality([*attempts, records], reached_by(config.target)))
    checks = compare(reported, observed)
    if cpu is not None:
        checks.append(Check("loader-worker CPU %", cpu[0], cpu[1], allowed=cpu[2]))
    return Observed(config, metrics, tags, records, checks, output, dict(run.data.params), run.info.run_id)
