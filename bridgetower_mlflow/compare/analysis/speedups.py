"""Pure speedup tables: accelerators vs a baseline, settings vs workers=0, best vs best."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import ConfigError
from .axes import AXIS_KEYS, AxisPoint, point_of, varying_axes
from .grouping import (
    CONFIG_KEYS,
    SHORT_KEY_NAMES,
    STUDY_BASELINE_SETTING,
    GroupStats,
    Setting,
    accelerator_sort_key,
    group_records,
    ratio,
)
from .runs import MEASURED, FailedRepeat, RunRecord

PREFERRED_BASELINE = "a100"


@dataclass(frozen=True)
class SpeedupRow:
    """Table 1: one setting at one axis point, each column's throughput and its speedup over the baseline column."""

    setting: Setting
    cells: dict[str, GroupStats]
    vs_baseline: dict[str, float | None]
    point: AxisPoint = AxisPoint()

    @property
    def label(self) -> str:
        return " ".join(part for part in (self.setting.label, self.point.label) if part)


@dataclass(frozen=True)
class SettingSpeedupRow:
    """Table 2: one setting, each column's speedup over its own workers=0 CPU-decode setting at the same point."""

    setting: Setting
    vs_baseline_setting: dict[str, float | None]
    point: AxisPoint = AxisPoint()

    @property
    def label(self) -> str:
        return " ".join(part for part in (self.setting.label, self.point.label) if part)


@dataclass(frozen=True)
class BestRow:
    """Table 3: a column's best setting at one axis point, head to head with the baseline column's best there."""

    column: str
    best: GroupStats
    vs_baseline: float | None
    point: AxisPoint = AxisPoint()


@dataclass(frozen=True)
class ConfigSection:
    """Everything measured under one configuration (allowed differences shown, swept axes as curves)."""

    source: str
    warmup: str
    config: dict[str, str]  # keys equal across the section
    differences: dict[str, dict[str, str]]  # allowed key -> {column: value}, only keys that differ
    columns: list[str]
    baseline_column: str | None
    rows: list[SpeedupRow] = field(default_factory=list)
    setting_rows: list[SettingSpeedupRow] = field(default_factory=list)
    best_rows: list[BestRow] = field(default_factory=list)
    axes: tuple[str, ...] = ()  # the swept axes (strategy, devices, batch size) that vary here
    points: list[AxisPoint] = field(default_factory=list)  # where on them cells sit, in axis order
    invalid: list[GroupStats] = field(default_factory=list)  # cells left out: too many failed repeats

    @property
    def published(self) -> bool:
        return self.source != MEASURED

    def title(self) -> str:
        parts = [f"{SHORT_KEY_NAMES.get(k, k)}={v}" for k, v in self.config.items() if v != ""]
        return ", ".join(parts + [f"warmup steps={self.warmup}"])

    def best_at(self, point: AxisPoint) -> dict[str, BestRow]:
        """Column -> its best row at one axis point."""
        return {row.column: row for row in self.best_rows if row.point == point}


def parse_allow_diff(text: str | None) -> tuple[str, ...]:
    """`per_device_train_batch_size,precision` -> validated key tuple."""
    keys = tuple(key.strip() for key in (text or "").split(",") if key.strip())
    for key in keys:
        if key not in CONFIG_KEYS:
            raise ConfigError(
                "allow_diff", key,
                "allowed: " + ", ".join(CONFIG_KEYS) + " (warmup rules and settings are never mixed)",
            )
    return keys


def build_sections(records: list[RunRecord], baseline: str | None, allow_diff: tuple[str, ...] = (),
                   failures: tuple[FailedRepeat, ...] = ()) -> list[ConfigSection]:
    """Group records and build the three tables for every configuration section.

    Runs that differ only in a swept axis (strategy, devices, batch size) share a section, one row per
    setting and point, so their curves can be drawn; an allowed difference is a column's, not an axis.
    """
    by_section: dict[tuple[object, ...], list[GroupStats]] = {}
    for group in group_records(records, failures):
        fixed = tuple(v for k, v in group.config.items() if k not in allow_diff and k not in AXIS_KEYS)
        by_section.setdefault((not group.published, group.source, group.warmup, fixed), []).append(group)
    sections = [
        _build_section(groups, baseline, allow_diff)
        for _, groups in sorted(by_section.items(), key=lambda item: (not item[0][0], str(item[0][1:])))
    ]
    return sections


def _column_of(group: GroupStats, allow_diff: tuple[str, ...], split: set[str]) -> str:
    if group.accelerator not in split:
        return group.accelerator
    values = ", ".join(f"{SHORT_KEY_NAMES.get(k, k)}={group.config[k]}" for k in allow_diff)
    return f"{group.accelerator} [{values}]"


def _build_section(groups: list[GroupStats], baseline: str | None, allow_diff: tuple[str, ...]) -> ConfigSection:
    variants: dict[str, set[tuple[str, ...]]] = {}
    for group in groups:
        variants.setdefault(group.accelerator, set()).add(tuple(group.config[k] for k in allow_diff))
    split = {accel for accel, seen in variants.items() if len(seen) > 1}
    column_groups: dict[str, list[GroupStats]] = {}
    for group in groups:
        column_groups.setdefault(_column_of(group, allow_diff, split), []).append(group)
    columns = sorted(column_groups, key=lambda c: (accelerator_sort_key(column_groups[c][0].accelerator), c))
    first = groups[0]
    config = {k: v for k, v in first.config.items() if all(g.config[k] == v for g in groups)}
    differences = {
        k: {c: column_groups[c][0].config[k] for c in columns}
        for k in allow_diff if k not in config
    }
    axes = varying_axes([g.config for g in groups], tuple(allow_diff))
    valid = {c: [g for g in gs if not g.invalid] for c, gs in column_groups.items()}
    layout = SectionLayout([c for c in columns if valid[c]], _baseline_column(columns, column_groups, baseline),
                           axes, sorted({point_of(g.config, axes) for g in groups}, key=AxisPoint.sort_key))
    rows, setting_rows, best_rows = _tables(layout, {c: gs for c, gs in valid.items() if gs})
    return ConfigSection(
        source=first.source, warmup=first.warmup, config=config, differences=differences,
        columns=layout.columns, baseline_column=layout.baseline_column, rows=rows, setting_rows=setting_rows,
        best_rows=best_rows, axes=axes, points=layout.points,
        invalid=[g for c in columns for g in column_groups[c] if g.invalid],
    )


def _baseline_column(columns: list[str], column_groups: dict[str, list[GroupStats]],
                     baseline: str | None) -> str | None:
    wanted = baseline.lower() if baseline else None
    accelerators = [column_groups[c][0].accelerator for c in columns]
    if wanted is None:
        wanted = PREFERRED_BASELINE if PREFERRED_BASELINE in accelerators else accelerators[0]
    return next((c for c, a in zip(columns, accelerators) if a == wanted), None)


@dataclass(frozen=True)
class SectionLayout:
    """What a section's tables are laid out by: its columns, baseline column, swept axes and points."""

    columns: list[str]
    baseline_column: str | None
    axes: tuple[str, ...]
    points: list[AxisPoint]


Tables = tuple[list[SpeedupRow], list[SettingSpeedupRow], list[BestRow]]


def _tables(layout: SectionLayout, column_groups: dict[str, list[GroupStats]]) -> Tables:
    """(rows, setting rows, best rows): one row per setting and point, best per column at each point."""
    cell_of = {(c, point_of(g.config, layout.axes), g.setting): g for c, gs in column_groups.items() for g in gs}
    places = sorted({(point, setting) for _, point, setting in cell_of},
                    key=lambda place: (place[0].sort_key(), place[1].sort_key()))
    base = layout.baseline_column
    rows: list[SpeedupRow] = []
    setting_rows: list[SettingSpeedupRow] = []
    best_rows: list[BestRow] = []
    for point, setting in places:
        cells = {c: cell_of[(c, point, setting)] for c in layout.columns if (c, point, setting) in cell_of}
        base_cell = cells.get(base or "")
        rows.append(SpeedupRow(setting, cells, {
            c: ratio(g.median, base_cell.median if base_cell else None) for c, g in cells.items()
        }, point))
        setting_rows.append(SettingSpeedupRow(setting, {
            c: ratio(g.median, _median(cell_of.get((c, point, STUDY_BASELINE_SETTING)))) for c, g in cells.items()
        }, point))
    for point in layout.points:
        best = {c: max(found, key=lambda g: g.median) for c in layout.columns
                if (found := [g for (col, at, _), g in cell_of.items() if col == c and at == point])}
        base_best = best.get(base or "")
        best_rows += [BestRow(c, best[c], ratio(best[c].median, base_best.median if base_best else None), point)
                      for c in layout.columns if c in best]
    return rows, setting_rows, best_rows


def _median(group: GroupStats | None) -> float | None:
    return group.median if group else None
