"""Pure grouping of RunRecords into identical configurations, with repeat statistics."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ...contract import ACCELERATOR_KINDS, DECODE_CLASSES, DECODE_CPU
from .axes import numeric
from .quality import QualityStats, quality_groups
from .runs import MEASURED, FailedRepeat, RunQuality, RunRecord
from .stats import NOISY_SPREAD, invalid_reason, median_or_none, olympic_mean, spread

# Everything that shaped a run except the accelerator and the data-loading setting.
CONFIG_KEYS = (
    "model", "dataset", "dataset_config", "per_device_train_batch_size", "devices", "precision",
    "max_seq_length", "distribution_strategy", "image_backend", "hf_args", "per_device_eval_batch_size",
)
SHORT_KEY_NAMES = {
    "per_device_train_batch_size": "batch/device", "max_seq_length": "seq",
    "distribution_strategy": "strategy", "dataset_config": "config", "image_backend": "images",
    "throughput_warmup_steps": "warmup steps", "per_device_eval_batch_size": "eval batch/device",
}
ACCELERATOR_ORDER = ACCELERATOR_KINDS
DECODE_ORDER = {name: index for index, name in enumerate(DECODE_CLASSES)}
# RunRecord fields train measures on some devices only; a cell keeps the values it has.
EFFICIENCY_FIELDS = ("model_tflops_per_second", "mfu", "joules_per_sample")
UNREPORTED_WORKERS = -1  # a published number whose worker count was not stated


def accelerator_sort_key(name: str) -> tuple[int, str]:
    """Canonical kinds in a fixed order, unknown ones after them alphabetically."""
    return (ACCELERATOR_ORDER.index(name), "") if name in ACCELERATOR_ORDER else (len(ACCELERATOR_ORDER), name)


@dataclass(frozen=True)
class Setting:
    """A data-loading setting: worker processes and where JPEGs were decoded."""

    workers: int
    decode: str

    @property
    def label(self) -> str:
        workers = "w?" if self.workers == UNREPORTED_WORKERS else f"w{self.workers}"
        return f"{workers} decode={self.decode}"

    @property
    def is_baseline(self) -> bool:
        """The study's reference setting: no worker processes, CPU decode."""
        return self.workers == 0 and self.decode == DECODE_CPU

    def sort_key(self) -> tuple[int, int, str]:
        return (self.workers, DECODE_ORDER.get(self.decode, 9), self.decode)


STUDY_BASELINE_SETTING = Setting(0, DECODE_CPU)  # what the data-loading speedups are over


@dataclass
class GroupStats:
    """Repeats of one configuration on one accelerator with one setting (built by group_records, through add)."""

    accelerator: str
    setting: Setting
    config: dict[str, str]  # CONFIG_KEYS -> value
    source: str
    warmup: str
    values: list[float] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    data_loaders: set[str] = field(default_factory=set)
    device_names: set[str] = field(default_factory=set)
    efficiency: dict[str, list[float]] = field(default_factory=dict)  # EFFICIENCY_FIELDS -> values
    peak_memory: list[float] = field(default_factory=list)  # device_peak_memory_gb of the runs that logged it
    per_device: list[float] = field(default_factory=list)  # samples/s per device of each run
    phase_fractions: dict[str, list[float]] = field(default_factory=dict)  # phase -> shares, runs that have it
    phase_seconds: dict[str, list[float]] = field(default_factory=dict)  # phase -> seconds per step
    bottlenecks: list[str] = field(default_factory=list)
    epoch_start_fractions: list[float] = field(default_factory=list)  # of the runs that logged one
    host_cpu_counts: set[str] = field(default_factory=set)
    sweep_cells: set[tuple[str, str]] = field(default_factory=set)  # (sweep run, cell) its runs repeat
    failures: list[FailedRepeat] = field(default_factory=list)  # failed repeats of those sweep cells
    qualities: list[tuple[str, RunQuality]] = field(default_factory=list)  # (run id, what it learned) per repeat

    def add(self, record: RunRecord) -> None:
        """One more finished repeat."""
        self.values.append(record.samples_per_second)
        self.run_ids.append(record.run_id)
        self.data_loaders.add(record.data_loader)
        self.device_names.update([record.device_name] if record.device_name else [])
        self.peak_memory.extend([record.device_peak_memory_gb] if record.device_peak_memory_gb is not None else [])
        per_device = record.samples_per_second_per_device
        count = numeric(record.devices)
        if per_device is None and count:
            per_device = record.samples_per_second / count
        self.per_device.extend([per_device] if per_device is not None else [])
        for name in EFFICIENCY_FIELDS:
            if getattr(record, name) is not None:
                self.efficiency.setdefault(name, []).append(getattr(record, name))
        for phase, share in record.phase_fractions:
            self.phase_fractions.setdefault(phase, []).append(share)
        for phase, seconds in record.phase_seconds:
            self.phase_seconds.setdefault(phase, []).append(seconds)
        self.bottlenecks.extend([record.bottleneck] if record.bottleneck else [])
        if record.epoch_start_fraction is not None:
            self.epoch_start_fractions.append(record.epoch_start_fraction)
        self.host_cpu_counts.update([record.host_cpu_count] if record.host_cpu_count else [])
        if record.sweep_cell and record.parent_run_id:
            self.sweep_cells.add((record.parent_run_id, record.sweep_cell))
        self.qualities.append((record.run_id, record.quality))

    def add_failure(self, failure: FailedRepeat) -> None:
        """A repeat of one of this cell's sweep cells that failed: kept in the record, never a value."""
        self.failures.append(failure)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def olympic(self) -> float | None:
        """MLPerf's olympic average (best and worst run dropped; a failed repeat is the worst); None under 5 runs."""
        return olympic_mean(self.values, failed=len(self.failures))

    @property
    def invalid(self) -> str:
        """Why the cell is left out of every comparison ('' when it is valid): two or more failed repeats."""
        return invalid_reason(self.n, self.failures)

    def quality(self) -> list[QualityStats]:
        """Its repeats' quality, one QualityStats per target (and none); failed sweep repeats never reached one."""
        return quality_groups(self.qualities, len(self.failures))

    @property
    def spread(self) -> float | None:
        """(max - min) / median of its repeats; None for a single run."""
        return spread(self.values)

    @property
    def noisy(self) -> bool:
        return (self.spread or 0.0) > NOISY_SPREAD

    def efficiency_median(self, name: str) -> float | None:
        """Median of one EFFICIENCY_FIELDS metric over the runs that have it."""
        return median_or_none(self.efficiency.get(name))

    @property
    def per_device_median(self) -> float | None:
        return median_or_none(self.per_device)

    def phase_shares(self) -> dict[str, float]:
        """Median share of the step per phase, for the phases its runs measured ({} where none did)."""
        return {phase: statistics.median(values) for phase, values in self.phase_fractions.items()}

    @property
    def epoch_start_share(self) -> float | None:
        """Median share of the window that epochs' first steps cost beyond the others (None: no run logged it)."""
        return median_or_none(self.epoch_start_fractions)

    def phase_step_seconds(self) -> dict[str, float]:
        return {phase: statistics.median(values) for phase, values in self.phase_seconds.items()}

    @property
    def peak_memory_gb(self) -> float | None:
        """The highest device peak memory of the cell's runs (what a capacity question needs); None if none."""
        return max(self.peak_memory) if self.peak_memory else None

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def minimum(self) -> float:
        return min(self.values)

    @property
    def maximum(self) -> float:
        return max(self.values)

    @property
    def published(self) -> bool:
        return self.source != MEASURED


def group_key(record: RunRecord) -> tuple[object, ...]:
    """Identity of a configuration on an accelerator: config, setting, hard separators."""
    config = tuple(getattr(record, key) for key in CONFIG_KEYS)
    setting = (record.dataloader_num_workers, record.decode)
    return (record.source, record.throughput_warmup_steps, config, record.accelerator, setting)


def group_records(records: list[RunRecord], failures: tuple[FailedRepeat, ...] = ()) -> list[GroupStats]:
    """Collapse repeats into GroupStats, one per identical configuration and accelerator; failed sweep repeats
    join the cell whose finished repeats share their sweep cell."""
    groups: dict[tuple[object, ...], GroupStats] = {}
    for record in records:
        key = group_key(record)
        if key not in groups:
            groups[key] = GroupStats(
                accelerator=record.accelerator,
                setting=Setting(record.dataloader_num_workers, record.decode),
                config={name: getattr(record, name) for name in CONFIG_KEYS},
                source=record.source,
                warmup=record.throughput_warmup_steps,
            )
        groups[key].add(record)
    owner: dict[tuple[str, str], GroupStats] = {}
    for group in groups.values():
        for cell in group.sweep_cells:
            owner.setdefault(cell, group)
    for failure in failures:
        if failure.cell_key in owner:
            owner[failure.cell_key].add_failure(failure)
    return list(groups.values())


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either side is missing or the base is zero."""
    if numerator is None or not denominator:
        return None
    return numerator / denominator
