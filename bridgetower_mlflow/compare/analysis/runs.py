"""A train run as compare analyses it: a RunRecord (a published number is one too), what the run learned
(RunQuality), a sweep repeat that failed (FailedRepeat). read/ builds them from MLflow, references/ from published
sources; everything else in compare takes them as they are.

Runs logged before a figure existed (the phase breakdown, evaluations, a target) have none: they show none, never
zeros.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...contract import PHASE_FORWARD_BACKWARD, PHASES
from ...target import Target, parse_target

MEASURED = "measured"
# Every phase a run can log, in the step's order; a merged forward_backward sits where its parts would.
PHASE_ORDER = (*PHASES[:4], PHASE_FORWARD_BACKWARD, *PHASES[4:])
Phases = tuple[tuple[str, float], ...]  # ((phase, share of the step or seconds per step), ...) in PHASE_ORDER
Finals = tuple[tuple[str, float], ...]  # ((eval metric, its final value), ...) in TARGET_METRICS order


@dataclass(frozen=True)
class QualityKey:
    """Which runs' quality can be pooled: the same target (or none), stopping at it or training on."""

    target: str = ""  # canonical spelling; "" without one
    stops: bool = True  # stop_at_target (always True without a target: nothing to stop at)

    @property
    def label(self) -> str:
        """`eval_recall_at_5>=0.2`, `... (trained on)` where the runs did not stop at it, `none`."""
        if not self.target:
            return "none"
        return self.target if self.stops else f"{self.target} (trained on)"

    def parsed(self) -> Target | None:
        return parse_target(self.target)

    def sort_key(self) -> tuple[bool, str, bool]:
        return (not self.target, self.target, not self.stops)


@dataclass(frozen=True)
class RunQuality:
    """One run's final eval metrics and time-to-target figures (None where the run did not log them)."""

    key: QualityKey = QualityKey()
    reached: bool | None = None  # None without a target
    time_to_target: float | None = None  # MLPerf's clock, evaluations included
    time_to_target_train: float | None = None
    samples_to_target: float | None = None
    steps_to_target: float | None = None
    best_value: float | None = None  # the best value of the target's metric any evaluation saw
    eval_samples_interval: float | None = None  # samples between evaluations (eval_steps > 0 only)
    finals: Finals = ()

    def final(self, metric: str) -> float | None:
        return dict(self.finals).get(metric)


@dataclass(frozen=True)
class RunRecord:
    """One finished train run (or one published number), reduced to what comparison needs."""

    run_id: str
    run_name: str
    experiment_id: str
    accelerator: str
    device_name: str
    model: str
    dataset: str
    dataset_config: str
    per_device_train_batch_size: str
    devices: str
    precision: str
    max_seq_length: str
    distribution_strategy: str
    throughput_warmup_steps: str
    dataloader_num_workers: int
    decode: str  # cpu | device | cpu-fallback (asked device decode, CPU ran) | other loader name
    data_loader: str
    samples_per_second: float
    samples_per_second_per_device: float | None = None
    train_runtime: float | None = None
    dataloader_wait_fraction: float | None = None
    input_bound: str = ""
    source: str = MEASURED  # `measured`, or the citation of a published number
    parent_run_id: str = ""
    model_tflops_per_second: float | None = None  # efficiency metrics: only where train measured them
    mfu: float | None = None
    joules_per_sample: float | None = None
    device_peak_memory_gb: float | None = None  # the main device's peak, where the device reports one
    image_backend: str = "fast"  # the CPU image transform (runs from before the option ran the fast one)
    phase_fractions: Phases = ()  # ((phase, share of the step), ...): only where train measured phases
    phase_seconds: Phases = ()  # ((phase, seconds per step), ...)
    phases_merged: str = ""  # what the run merged (Gaudi lazy mode: forward+backward)
    bottleneck: str = ""
    host_cpu_count: str = ""  # the host's cores (what CPU devices share)
    sweep_cell: str = ""  # the sweep grid cell this run repeats, where a sweep ran it
    hf_args: str = ""  # the user's extra TrainingArguments flags, canonical (canonical_hf_args)
    epoch_start_fraction: float | None = None  # what epochs' first steps cost beyond the others, share of the window
    per_device_eval_batch_size: str = ""  # eval_loss uses in-batch negatives: it changes with the eval batch
    quality: RunQuality = RunQuality()  # final eval metrics; with a target, how long it took to reach it


@dataclass(frozen=True)
class FailedRepeat:
    """A sweep child run that ended FAILED: its cell, its repeat and why."""

    parent_run_id: str
    cell: str
    repeat: str
    run_id: str
    reason: str

    @property
    def cell_key(self) -> tuple[str, str]:
        return (self.parent_run_id, self.cell)

    def sort_key(self) -> tuple[int, str, str]:
        """In repeat order (the store lists runs newest first)."""
        return (int(self.repeat) if self.repeat.isdigit() else 0, self.repeat, self.run_id)
