"""The axes users sweep (strategy, devices, batch size): runs that differ only there share a section, as curves."""

from __future__ import annotations

from dataclasses import dataclass

STRATEGY_AXIS, DEVICES_AXIS, BATCH_AXIS = "distribution_strategy", "devices", "per_device_train_batch_size"
AXIS_KEYS = (STRATEGY_AXIS, DEVICES_AXIS, BATCH_AXIS)  # the order of a point's label, as in sweep's cell names
AXIS_LETTERS = {STRATEGY_AXIS: "", DEVICES_AXIS: "d", BATCH_AXIS: "b"}
AXIS_TITLES = {STRATEGY_AXIS: "distribution strategy", DEVICES_AXIS: "devices", BATCH_AXIS: "batch size per device"}


def numeric(value: str) -> float | None:
    """A device count or batch size as a number; None for anything else (a strategy, an unstated value)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def axis_sort_key(value: str) -> tuple[int, float, str]:
    """Numbers in numeric order, then words alphabetically."""
    number = numeric(value)
    return (0, number, "") if number is not None else (1, 0.0, str(value))


@dataclass(frozen=True)
class AxisPoint:
    """Where on a section's varying axes a cell sits: ((axis key, value), ...); empty where nothing varies."""

    items: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.items)

    @property
    def label(self) -> str:
        """`ddp d2 b8` (the sweep's cell-name spelling); '' for the empty point."""
        return " ".join(f"{AXIS_LETTERS[key]}{value}" for key, value in self.items)

    def value(self, key: str) -> str | None:
        return next((value for name, value in self.items if name == key), None)

    def without(self, key: str) -> AxisPoint:
        """The point with one axis left out: what a curve along that axis holds fixed."""
        return AxisPoint(tuple(item for item in self.items if item[0] != key))

    def sort_key(self) -> tuple[tuple[int, float, str], ...]:
        return tuple(axis_sort_key(value) for _, value in self.items)


def varying_axes(configs: list[dict[str, str]], allow_diff: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The axes whose values differ across these configurations (an allowed difference is shown, not an axis)."""
    return tuple(key for key in AXIS_KEYS if key not in allow_diff and len({c.get(key) for c in configs}) > 1)


def point_of(config: dict[str, str], axes: tuple[str, ...]) -> AxisPoint:
    return AxisPoint(tuple((key, str(config.get(key, ""))) for key in axes))


def axis_values(points: list[AxisPoint], key: str) -> list[str]:
    """The values one axis takes over these points, in axis order."""
    return sorted({value for point in points if (value := point.value(key)) is not None}, key=axis_sort_key)


def axes_text(points: list[AxisPoint], axes: tuple[str, ...]) -> str:
    """`curves over devices 1, 2 and batch size per device 8, 16`."""
    return "curves over " + " and ".join(f"{AXIS_TITLES[key]} {', '.join(axis_values(points, key))}" for key in axes)
