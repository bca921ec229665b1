"""What a sweep checks before any cell starts: how many devices this host has, and whether a cell can measure."""

from __future__ import annotations

import dataclasses
import os

from ..errors import AcceleratorUnavailable, ConfigError

WARMUP_FIELD, MAX_STEPS_FIELD = "throughput_warmup_steps", "max_steps"


def option_value(args: list[str], field_name: str) -> str | None:
    """The last value of `--field-name` / `--field_name` (`--x v` or `--x=v`) in a train argument list."""
    spellings = {f"--{field_name}", f"--{field_name.replace('_', '-')}"}
    value = None
    for index, arg in enumerate(args):
        name, equals, rest = arg.partition("=")
        if name in spellings:
            value = rest if equals else (args[index + 1] if index + 1 < len(args) else None)
    return value


def train_default(field_name: str) -> object:
    from ..config import TrainConfig

    return next(f.default for f in dataclasses.fields(TrainConfig) if f.name == field_name)


def check_cells_can_measure(train_args: list[str]) -> None:
    """Refuse a grid whose every cell would fail: the warmup steps leave no step of max_steps to measure."""
    from ..config import parse_int

    max_text = option_value(train_args, MAX_STEPS_FIELD)
    max_steps = parse_int(MAX_STEPS_FIELD, max_text if max_text is not None else train_default(MAX_STEPS_FIELD))
    if max_steps <= 0:
        return  # trained by epochs: the step count is known only once the data is
    warmup_text = option_value(train_args, WARMUP_FIELD)
    warmup = parse_int(WARMUP_FIELD, warmup_text if warmup_text is not None else train_default(WARMUP_FIELD), 0)
    if warmup >= max_steps:
        raise ConfigError(WARMUP_FIELD, warmup, f"allowed: fewer than max_steps={max_steps}, or a larger max_steps "
                                                "(every cell would stop before a step is measured)")


def host_cores() -> int:
    return os.cpu_count() or 1


def device_capacity(adapter, processes_over_cores: bool, wanted: tuple[int | None, ...]) -> tuple[int | None, str]:
    """(most devices one cell can have here, why), or (None, '') when nothing limits it before a cell runs.

    On the CPU a device is a process over the host's cores: at most one per core. Elsewhere the adapter's
    own detection counts the devices; with none visible at all the cells run and fail with train's reason.
    """
    asked = sorted(n for n in wanted if n is not None and n > 1)
    if not asked:
        return None, ""
    if processes_over_cores:
        cores = host_cores()
        return cores, f"a cpu device is a process over this host's cores, {cores} here"
    try:
        adapter.detect(1, 1, launcher=True)
    except AcceleratorUnavailable:
        return None, ""
    fits = 1
    for count in asked:
        try:
            adapter.detect(count, count, launcher=True)
        except AcceleratorUnavailable as exc:
            return fits, str(exc).split("; ", 1)[-1]
        fits = count
    return None, ""


def cpu_devices_note(accel: str, wanted: tuple[int | None, ...]) -> str:
    """On CPU the devices axis is a real scaling curve of the host, not of separate devices: say so."""
    counts = [n for n in wanted if n is not None]
    if len(counts) < 2 and not any(n > 1 for n in counts):
        return ""
    return (f"devices on {accel} are processes (torchrun ranks) sharing this host's {host_cores()} cores: "
            "the curve is the host's scaling, not that of separate devices")
