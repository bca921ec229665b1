"""The truth observer's eyes inside a training process, outside the product's code and callbacks.

Installed by tests/fakes/truth/sitecustomize.py when BRIDGETOWER_TRUTH_DIR is set (every rank a launcher starts
inherits it). It patches only the libraries, as they are imported, never bridgetower_mlflow:
- torch's DataLoader iterators: each `next()` timed on its own clock (a train fetch unless an evaluation runs),
  and the pids of every worker process started;
- multiprocessing's reaping of forked children: each worker's CPU seconds from wait4 (its exit included);
- the Trainer's `training_step` (transformers' and GaudiTrainer's own): each batch that ran, with its real rows;
- torch's global optimizer-step hook: the instant each optimizer step ended;
- the Trainer's `train`, `evaluate` and `_save_checkpoint`: when they ran, and the arguments `train` started with;
- the callback handler's `on_evaluate` while training: each evaluation's global step and metrics.
At exit the process writes what it saw as `<pid>.json` into that folder (only a process that trained). With
BRIDGETOWER_TRUTH_HOLD_FILE and BRIDGETOWER_TRUTH_HOLD_AT set, optimizer step HOLD_AT does not end while that
file exists (the harness kills such a run, to resume it): the process writes what it saw so far first.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import json
import os
import sys
import threading
import time
from pathlib import Path

OUT_ENV = "BRIDGETOWER_TRUTH_DIR"
HOLD_FILE_ENV, HOLD_AT_ENV = "BRIDGETOWER_TRUTH_HOLD_FILE", "BRIDGETOWER_TRUTH_HOLD_AT"
TRAINER_METHODS = ("train", "training_step", "evaluate", "_save_checkpoint")


def rows_of(batch) -> int:
    """Rows of a batch: the first dimension of its first tensor (what the step's forward receives)."""
    values = batch.values() if isinstance(batch, dict) else batch
    return next(int(value.shape[0]) for value in values if getattr(value, "shape", None))


class Recorder:
    """What one process did, on perf_counter (the host's monotonic clock, one for every process)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.train_calls: list[list[float]] = []  # [start, end] of the outermost Trainer.train
        self.train_starts: list[float] = []  # its start, as it starts (a killed attempt's train never returns)
        self.loader_iters: list[float] = []  # a train DataLoader's iteration starting
        self.fetches: list[list[float]] = []  # [start, end] of each train-loader next()
        self.batches: list[list[float]] = []  # [start, rows] of each training_step
        self.steps: list[float] = []  # each optimizer step's end
        self.evals: list[list[float]] = []
        self.eval_metrics: list[list] = []  # [global step, metrics] of each evaluation while training, in order
        self.saves: list[list[float]] = []
        self.worker_pids: set[int] = set()
        self.reaped: list[list[float]] = []  # [pid, time.time(), CPU seconds] of each forked child reaped
        self.first_batch: dict = {}  # the first training batch: shapes, token ids, mask, torch threads
        self.training_args: dict = {}  # the Trainer's own `args.to_dict()` as its outermost `train` started
        self.trainer_amp: dict = {}  # GaudiTrainer's own autocast switches then (it clears args.bf16 for them)
        self._local = threading.local()

    def active(self, name: str) -> bool:
        return getattr(self._local, name, 0) > 0

    def timed(self, name: str, function, spans: list):
        """`function` wrapped: its outermost call (GaudiTrainer's calling transformers') recorded in `spans`."""
        recorder = self

        def wrapper(*args, **kwargs):
            depth = getattr(recorder._local, name, 0)
            setattr(recorder._local, name, depth + 1)
            start = time.perf_counter()
            if name == "train" and depth == 0:
                recorder.train_starts.append(start)
            try:
                return function(*args, **kwargs)
            finally:
                setattr(recorder._local, name, depth)
                if depth == 0:
                    spans.append([start, time.perf_counter()])

        wrapper.__wrapped__ = function
        return wrapper

    def training(self) -> bool:
        return self.active("train") and not self.active("evaluate")

    def step_ended(self, *_args) -> None:
        if self.training():
            self.steps.append(time.perf_counter())
            hold = os.environ.get(HOLD_FILE_ENV)
            if hold and len(self.steps) == int(os.environ[HOLD_AT_ENV]):
                self.write()  # what this attempt saw up to here: it is killed while held, without exiting
                Path(os.environ[OUT_ENV], "held").write_text(str(os.getpid()))
                while os.path.exists(hold):
                    time.sleep(0.1)  # a step that does not end: the harness kills the run here

    def batch_ran(self, inputs) -> None:
        if self.active("training_step"):  # GaudiTrainer's training_step calling transformers': one batch
            return
        self.batches.append([time.perf_counter(), rows_of(inputs)])
        if not self.first_batch:
            import torch

            self.first_batch = {name: list(value.shape) for name, value in inputs.items() if hasattr(value, "shape")}
            for name in ("input_ids", "attention_mask"):
                if name in inputs:
                    self.first_batch[name + "_values"] = inputs[name].tolist()
            self.first_batch["torch_threads"] = torch.get_num_threads()

    def write(self) -> None:
        folder = os.environ.get(OUT_ENV)
        if os.getpid() != self.pid or not folder or not self.train_starts:
            return
        data = {key: value for key, value in vars(self).items() if not key.startswith("_")}
        data.update(worker_pids=sorted(self.worker_pids), rank=int(os.environ.get("RANK", "0")))
        Path(folder, f"{self.pid}.json").write_text(json.dumps(data))


def patch_trainer(recorder: Recorder, cls) -> None:
    """Wrap the methods `cls` itself defines (a subclass's override, or transformers' own)."""
    spans = {"train": recorder.train_calls, "evaluate": recorder.evals, "_save_checkpoint": recorder.saves}
    for name in TRAINER_METHODS:
        if name not in vars(cls):
            continue
        original = getattr(cls, name)
        if name == "training_step":
            setattr(cls, name, _counting_step(recorder, original))
        elif name == "train":
            setattr(cls, name, _recording_args(recorder, recorder.timed(name, original, spans[name])))
        else:
            setattr(cls, name, recorder.timed(name, original, spans[name]))


def _recording_args(recorder: Recorder, train):
    """`train` noting the arguments the Trainer really holds as it starts (after every product-side change)."""
    def recording(self, *args, **kwargs):
        if not recorder.training_args:
            recorder.training_args = json.loads(json.dumps(self.args.to_dict(), default=str))
            recorder.trainer_amp = {key: bool(getattr(self, key)) for key in ("use_hpu_amp", "use_cpu_amp")
                                    if hasattr(self, key)}
        return train(self, *args, **kwargs)

    recording.__wrapped__ = train
    return recording


def _counting_step(recorder: Recorder, original):
    def training_step(self, model, inputs, *args, **kwargs):
        recorder.batch_ran(inputs)
        depth = getattr(recorder._local, "training_step", 0)
        recorder._local.training_step = depth + 1
        try:
            return original(self, model, inputs, *args, **kwargs)
        finally:
            recorder._local.training_step = depth

    return training_step


def patch_reaping(recorder: Recorder, module) -> None:
    """Reap forked children (data-loader workers) with wait4: the kernel's own count of each one's CPU seconds,
    its exit included (unmapping a forked copy of the trainer costs more than a poll of /proc can see)."""

    def poll(self, flag=os.WNOHANG):
        if self.returncode is None:
            try:
                pid, status, usage = os.wait4(self.pid, flag)
            except OSError:  # not started yet (as multiprocessing's own poll answers)
                return None
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                recorder.reaped.append([pid, time.time(), usage.ru_utime + usage.ru_stime])
        return self.returncode

    module.Popen.poll = poll


def patch_dataloader(recorder: Recorder, module) -> None:
    """Time every train-loader `next()`; note every worker process; note a train iteration's start."""
    base, workers, loader = module._BaseDataLoaderIter, module._MultiProcessingDataLoaderIter, module.DataLoader
    next_original, init_original, iter_original = base.__next__, workers.__init__, loader.__iter__

    def __next__(self):
        start = time.perf_counter()
        try:
            return next_original(self)
        finally:
            if recorder.training():
                recorder.fetches.append([start, time.perf_counter()])

    def __init__(self, *args, **kwargs):
        init_original(self, *args, **kwargs)
        recorder.worker_pids.update(worker.pid for worker in self._workers)

    def __iter__(self):
        if recorder.training():
            recorder.loader_iters.append(time.perf_counter())
        return iter_original(self)

    base.__next__, workers.__init__, loader.__iter__ = __next__, __init__, __iter__


def patch_callbacks(recorder: Recorder, module) -> None:
    """Note the global step and metrics of every evaluation while training (the Trainer hands them to callbacks)."""
    original = module.CallbackHandler.on_evaluate

    def on_evaluate(self, args, state, control, metrics, **kwargs):
        if recorder.active("train"):
            recorder.eval_metrics.append([state.global_step, dict(metrics)])
        return original(self, args, state, control, metrics, **kwargs)

    module.CallbackHandler.on_evaluate = on_evaluate


class PatchOnImport(importlib.abc.MetaPathFinder):
    """Runs `patches[name](module)` right after module `name` is first executed (nothing is imported early:
    the Gaudi stack reads its settings when torch loads)."""

    def __init__(self, patches: dict) -> None:
        self.patches = patches

    def find_spec(self, name, path=None, target=None):
        if name not in self.patches:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        execute, patch = spec.loader.exec_module, self.patches.pop(name)

        def exec_module(module):
            execute(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


def install() -> Recorder:
    """Start observing this process (and write what it saw at exit)."""
    recorder = Recorder()
    sys.meta_path.insert(0, PatchOnImport({
        "torch.utils.data.dataloader": lambda module: patch_dataloader(recorder, module),
        "multiprocessing.popen_fork": lambda module: patch_reaping(recorder, module),
        "torch.optim.optimizer": lambda module: module.register_optimizer_step_post_hook(recorder.step_ended),
        "transformers.trainer": lambda module: patch_trainer(recorder, module.Trainer),
        "transformers.trainer_callback": lambda module: patch_callbacks(recorder, module),
        "optimum.habana.transformers.trainer": lambda module: patch_trainer(recorder, module.GaudiTrainer),
    }))
    atexit.register(recorder.write)
    return recorder
