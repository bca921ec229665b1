"""The sweep grid: workers x device decode x strategy x batch x devices x repeats, minus what cannot run."""

from __future__ import annotations

from dataclasses import dataclass

from ..compare.analysis.grouping import Setting
from ..config import DISTRIBUTION_STRATEGIES, parse_bool, parse_int
from ..contract import DECODE_CPU, DECODE_DEVICE
from ..errors import ConfigError

DEFAULT_STRATEGY = DISTRIBUTION_STRATEGIES[0]
FAST_DDP = DISTRIBUTION_STRATEGIES[1]


@dataclass(frozen=True)
class SweepCell:
    """One child train run of the grid (plain fields: the Ray backend ships it as a dict)."""

    accel: str
    workers: int
    device_decode: bool
    repeat: int
    strategy: str = DEFAULT_STRATEGY
    batch: int | None = None  # None: train's default batch size
    named_strategy: bool = False  # the name shows the strategy (more than one was swept)
    named_batch: bool = False  # the name shows the batch size (more than one was swept)
    devices: int | None = None  # None: train's default (one device)
    named_devices: bool = False  # the name shows the device count (more than one was swept)
    seed: int | None = None  # None: train's default (quality.QualitySettings.seed_of)

    @property
    def setting(self) -> str:
        """The cell's label without accelerator and repeat: compare's data-loading label plus the swept axes."""
        parts = [Setting(self.workers, DECODE_DEVICE if self.device_decode else DECODE_CPU).label]
        if self.named_strategy:
            parts.append(self.strategy)
        if self.named_devices and self.devices is not None:
            parts.append(f"d{self.devices}")
        if self.named_batch and self.batch is not None:
            parts.append(f"b{self.batch}")
        return " ".join(parts)

    @property
    def run_name(self) -> str:
        return f"{self.accel} {self.setting} r{self.repeat}"

    def train_args(self) -> list[str]:
        args = [
            "--accel", self.accel, "--dataloader-num-workers", str(self.workers),
            "--device-decode", "true" if self.device_decode else "false", "--run-name", self.run_name,
            "--distribution-strategy", self.strategy,
        ]
        if self.batch is not None:
            args += ["--per-device-train-batch-size", str(self.batch)]
        if self.devices is not None:
            args += ["--devices", str(self.devices)]
        if self.seed is not None:
            args += ["--seed", str(self.seed)]
        return args


@dataclass(frozen=True)
class SweepAxes:
    """The parsed values of every axis; batches [None] = train's default."""

    workers: list[int]
    decodes: list[bool]
    repeats: int
    strategies: tuple[str, ...] = (DEFAULT_STRATEGY,)
    batches: tuple[int | None, ...] = (None,)
    devices: tuple[int | None, ...] = (None,)  # (None,): train's default, one device


@dataclass(frozen=True)
class Capabilities:
    """What the accelerator adapter can do, as the grid needs it."""

    device_decode: bool
    strategies: tuple[str, ...] = (DEFAULT_STRATEGY,)
    max_devices: int | None = None  # None: not limited here (or not known before a cell runs)
    devices_limit: str = ""  # why max_devices is what it is, for the skip note


@dataclass
class SweepPlan:
    cells: list[SweepCell]
    notes: list[str]


def _items(field_name: str, text, example: str = "0,1,2") -> list[str]:
    items = [part.strip() for part in str(text).split(",") if part.strip()]
    if not items:
        raise ConfigError(field_name, text, f"allowed: a comma-separated list, e.g. {example}")
    return items


def parse_workers(text) -> list[int]:
    """'0,1,2' -> [0, 1, 2] (duplicates dropped, order kept)."""
    values = [parse_int("workers", item, 0) for item in _items("workers", text)]
    return list(dict.fromkeys(values))


def parse_device_decode(text) -> list[bool]:
    """'false,true' -> [False, True]."""
    values = [parse_bool("device_decode", item) for item in _items("device_decode", text)]
    return list(dict.fromkeys(values))


def parse_strategies(text) -> tuple[str, ...]:
    """'ddp,fast_ddp' -> ('ddp', 'fast_ddp')."""
    allowed = "allowed: a comma-separated list of " + ", ".join(DISTRIBUTION_STRATEGIES)
    values = []
    for item in _items("distribution_strategy", text, "ddp,fast_ddp"):
        if item.lower() not in DISTRIBUTION_STRATEGIES:
            raise ConfigError("distribution_strategy", text, allowed)
        values.append(item.lower())
    return tuple(dict.fromkeys(values))


def parse_batches(text) -> tuple[int | None, ...]:
    """'4,8' -> (4, 8); empty or None -> (None,): every cell gets train's default."""
    if text is None or not str(text).strip():
        return (None,)
    items = _items("per_device_train_batch_size", text, "8,16")
    return tuple(dict.fromkeys(parse_int("per_device_train_batch_size", item, 1) for item in items))


def parse_devices(text) -> tuple[int | None, ...]:
    """'1,2,4,8' -> (1, 2, 4, 8); empty or None -> (None,): every cell gets train's default (one device)."""
    if text is None or not str(text).strip():
        return (None,)
    items = _items("devices", text, "1,2,4,8")
    return tuple(dict.fromkeys(parse_int("devices", item, 1) for item in items))


def _skips(accel: str, axes: SweepAxes, can: Capabilities) -> tuple[list[bool], tuple[str, ...], list[str]]:
    """The decodes and strategies the accelerator can run, and a note for each value it cannot."""
    decodes, strategies, notes = list(axes.decodes), axes.strategies, []
    per_value = len(axes.workers) * len(axes.batches) * len(axes.devices) * axes.repeats
    if True in decodes and not can.device_decode:
        notes.append(f"skipped device_decode=true on {accel}: the {accel} adapter has no on-device JPEG decode "
                     f"({per_value * len(strategies)} cells not run, not faked)")
        decodes = [d for d in decodes if not d]
    for strategy in [s for s in strategies if s not in can.strategies]:
        notes.append(f"skipped distribution_strategy={strategy} on {accel}: the {accel} adapter has no {strategy} "
                     f"({per_value * len(decodes)} cells not run, not faked)")
    return decodes, tuple(s for s in strategies if s in can.strategies), notes


def _device_skips(accel: str, axes: SweepAxes, can: Capabilities) -> tuple[tuple[int | None, ...], list[str]]:
    """The device counts the accelerator has, and a note for those it has not."""
    too_many = [n for n in axes.devices if n is not None and can.max_devices is not None and n > can.max_devices]
    if not too_many:
        return axes.devices, []
    cells = len(axes.workers) * len(axes.batches) * len(axes.strategies) * len(axes.decodes) * axes.repeats
    listed = ",".join(str(n) for n in too_many)
    note = (f"skipped devices={listed} on {accel}: {can.devices_limit or f'at most {can.max_devices} here'} "
            f"({cells * len(too_many)} cells not run, not faked)")
    return tuple(n for n in axes.devices if n not in too_many), [note]


def _is_duplicate(cell: SweepCell, strategies: tuple[str, ...]) -> bool:
    """fast_ddp on one device: no gradient all-reduce to replace, so GaudiTrainer runs it as plain ddp."""
    return cell.strategy == FAST_DDP and DEFAULT_STRATEGY in strategies and (cell.devices or 1) == 1


def _duplicate_note(accel: str, skipped: int) -> str:
    return (f"skipped distribution_strategy={FAST_DDP} at devices=1 on {accel}: one device has no gradient "
            f"all-reduce, so {FAST_DDP} runs as plain {DEFAULT_STRATEGY} there and the {DEFAULT_STRATEGY} cell "
            f"already measures it ({skipped} cells not run, not faked)")


def plan_cells(accel: str, axes: SweepAxes, can: Capabilities) -> SweepPlan:
    """Repeat-major order, so slow drift spreads over all settings instead of one.

    Names show strategy, devices and batch only when more than one was asked for, so one-value sweeps keep
    short names.
    """
    decodes, strategies, notes = _skips(accel, axes, can)
    if not strategies:
        raise ConfigError("distribution_strategy", ",".join(axes.strategies),
                          f"allowed on {accel}: " + ", ".join(can.strategies) + " (no cell would be left to run)")
    if not decodes:
        raise ConfigError("device_decode", "true", f"allowed on {accel}: false (no cell would be left to run)")
    devices, device_notes = _device_skips(accel, axes, can)
    if not devices:
        raise ConfigError("devices", ",".join(str(n) for n in axes.devices),
                          f"allowed on {accel}: 1..{can.max_devices} (no cell would be left to run)")
    named = (len(axes.strategies) > 1, len(axes.batches) > 1, len(axes.devices) > 1)
    cells = [
        SweepCell(accel, w, d, r, s, b, named[0], named[1], n, named[2])
        for r in range(1, axes.repeats + 1) for s in strategies for n in devices for b in axes.batches
        for d in decodes for w in axes.workers
    ]
    kept = [cell for cell in cells if not _is_duplicate(cell, strategies)]
    if len(kept) < len(cells):
        notes.append(_duplicate_note(accel, len(cells) - len(kept)))
    return SweepPlan(kept, notes + device_notes)
