"""Pure grouping of RunRecords into identical configurations, with repeat statistics."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ..contract import ACCELERATOR_KINDS, DECODE_CLASSES, DECODE_CPU
from .records import RunRecord
from .stats import median_or_none, olympic_mean

# Everything that shaped a run except the accelerator and the data-loading setting.
CONFIG_KEYS = (
    "model", "dataset", "dataset_config", "per_device_train_batch_size", "devices", "precision",
    "max_seq_length", "distribution_strategy", "image_backend",
)
# Keys that never sit side by side, even when asked: different warmup rules measure different things.
HARD_KEYS = ("source", "throughput_warmup_steps")
SHORT_KEY_NAMES = {
    "per_device_train_batch_size": "batch/device", "max_seq_length": "seq",
    "distribution_strategy": "strategy", "dataset_config": "config", "image_backend": "images",
    "throughput_warmup_steps": "warmup steps",
}
ACCELERATOR_ORDER = ACCELERATOR_KINDS
DECODE_ORDER = {name: index for index, name in enumerate(DECODE_CLASSES)}
# RunRecord fields train measures on some devices only; a cell keeps the values it has.
EFFICIENCY_FIELDS = ("model_tflops_per_second", "mfu", "joules_per_sample")
UNREPORTED_WORKERS = -1  # a published number whose worker count was not stated


def accelerator_sort_key(name: str) -> tuple:
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

    def sort_key(self) -> tuple:
        return (self.workers, DECODE_ORDER.get(self.decode, 9), self.decode)


@dataclass
class GroupStats:
    """Repeats of one configuration on one accelerator with one setting."""

    accelerator: str
    setting: Setting
    config: dict  # CONFIG_KEYS -> value
    source: str
    warmup: str
    values: list[float] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    data_loaders: set[str] = field(default_factory=set)
    device_names: set[str] = field(default_factory=set)
    efficiency: dict[str, list[float]] = field(default_factory=dict)  # EFFICIENCY_FIELDS -> values
    peak_memory: list[float] = field(default_factory=list)  # device_peak_memory_gb of the runs that logged it

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def olympic(self) -> float | None:
        """MLPerf's olympic average (best and worst run dropped); None under 5 runs."""
        return olympic_mean(self.values)

    def efficiency_median(self, name: str) -> float | None:
        """Median of one EFFICIENCY_FIELDS metric over the runs that have it."""
        return median_or_none(self.efficiency.get(name))

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
        return self.source != "measured"


def group_key(record: RunRecord) -> tuple:
    """Identity of a configuration on an accelerator: config, setting, hard separators."""
    config = tuple(getattr(record, key) for key in CONFIG_KEYS)
    setting = (record.dataloader_num_workers, record.decode)
    return (record.source, record.throughput_warmup_steps, config, record.accelerator, setting)


def group_records(records: list[RunRecord]) -> list[GroupStats]:
    """Collapse repeats into GroupStats, one per identical configuration and accelerator."""
    groups: dict[tuple, GroupStats] = {}
    for record in records:
        key = group_key(record)
        group = groups.get(key)
        if group is None:
            group = groups[key] = GroupStats(
                accelerator=record.accelerator,
                setting=Setting(record.dataloader_num_workers, record.decode),
                config={name: getattr(record, name) for name in CONFIG_KEYS},
                source=record.source,
                warmup=record.throughput_warmup_steps,
            )
        group.values.append(record.samples_per_second)
        group.run_ids.append(record.run_id)
        group.data_loaders.add(record.data_loader)
        if record.device_name:
            group.device_names.add(record.device_name)
        if record.device_peak_memory_gb is not None:
            group.peak_memory.append(record.device_peak_memory_gb)
        for name in EFFICIENCY_FIELDS:
            if getattr(record, name) is not None:
                group.efficiency.setdefault(name, []).append(getattr(record, name))
    return list(groups.values())


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either side is missing or the base is zero."""
    if numerator is None or not denominator:
        return None
    return numerator / denominator
