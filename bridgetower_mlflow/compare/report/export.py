"""Comparison -> plain rows and documents: CSV, JSON, and the tables compare logs with mlflow.log_table.

Quality has rows of its own: each cell's quality per target (quality.csv, the JSON's sections, a log_table), and each
headline pair's time to target and quality verdict per shared target (headline.csv, the JSON's headline).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ...contract import (
    ACCELERATOR_TAG,
    DECODE_TAG,
    EPOCH_START_EXTRA_FRACTION_METRIC,
    EVAL_SAMPLES_INTERVAL_METRIC,
    PEAK_MEMORY_METRIC,
    SAMPLES_TO_TARGET_METRIC,
    TARGET_BEST_METRIC,
    TARGET_METRICS,
    THROUGHPUT_METRIC,
    TIME_TO_TARGET_METRIC,
    phase_fraction_metric,
)
from ..analysis.cost import usd_per_million_samples
from ..analysis.grouping import CONFIG_KEYS, EFFICIENCY_FIELDS, GroupStats
from ..analysis.headline import GAUDI_SIDE, GPU_SIDE, CellPair, HeadlinePair
from ..analysis.published_pairs import PAIR_RULE, PublishedPair, setting_text
from ..analysis.quality import QualityStats, Spread
from ..analysis.quality_pairs import QualityPair, quality_pairs
from ..analysis.runs import PHASE_ORDER
from ..analysis.scaling import scaling_points
from ..analysis.speedups import ConfigSection, SettingSpeedupRow, SpeedupRow
from ..analysis.stats import within_noise
from ..comparison import Comparison
from .quality_tables import DIFFERS, gaps_text, placed_quality, quality_cell, to_target_cell
from .tables import pair_place, section_heading

Row = dict[str, Any]  # one plain row of numbers and words (CSV, JSON, log_table)
BEST, MATCHED = "best", "matched"  # which cells of a headline pair a row is about
CSV_FIELDS = (
    "section", "source", "throughput_warmup_steps", *CONFIG_KEYS, ACCELERATOR_TAG, "column", "setting",
    "dataloader_num_workers", DECODE_TAG, "data_loaders", "device_names", "n", "median", "min", "max",
    "baseline_column", "speedup_vs_baseline", "speedup_vs_w0_cpu_decode", "best_for_column",
    "best_vs_baseline_best", "run_ids", "olympic_mean", "speedup_vs_baseline_within_noise",
    *EFFICIENCY_FIELDS, "usd_per_million_samples", PEAK_MEMORY_METRIC,
    "per_device_median", "spread", "noisy", "failed_repeats", "invalid",
)
# a column each only where some run measured it: the phases, and what epochs' first steps cost
MEASURED_SOMETIMES = (*(phase_fraction_metric(phase) for phase in PHASE_ORDER), EPOCH_START_EXTRA_FRACTION_METRIC)


def _cell_fields(comparison: Comparison, index: int, group: GroupStats, column: str) -> Row:
    """What a cell is, valid or not: its configuration, setting and repeats."""
    return {
        "section": index, "source": group.source, "throughput_warmup_steps": group.warmup,
        **group.config, ACCELERATOR_TAG: group.accelerator, "column": column,
        "setting": group.setting.label, "dataloader_num_workers": group.setting.workers,
        DECODE_TAG: group.setting.decode, "data_loaders": " ".join(sorted(group.data_loaders)),
        "device_names": " | ".join(sorted(group.device_names)), "n": group.n,
        "median": group.median, "min": group.minimum, "max": group.maximum,
        "run_ids": " ".join(group.run_ids), "olympic_mean": group.olympic,
        **{name: group.efficiency_median(name) for name in EFFICIENCY_FIELDS},
        "usd_per_million_samples": usd_per_million_samples(group, comparison.prices),
        PEAK_MEMORY_METRIC: group.peak_memory_gb, "per_device_median": group.per_device_median,
        "spread": group.spread, "noisy": group.noisy, "failed_repeats": len(group.failures),
        "invalid": group.invalid, **{phase_fraction_metric(p): v for p, v in group.phase_shares().items()},
        **({EPOCH_START_EXTRA_FRACTION_METRIC: group.epoch_start_share} if group.epoch_start_share is not None else {}),
    }


def _group_row(comparison: Comparison, index: int, section: ConfigSection, row: SpeedupRow,
               setting_row: SettingSpeedupRow, column: str) -> Row:
    group, best = row.cells[column], section.best_at(row.point)[column]
    base = row.cells.get(section.baseline_column or "")
    return {
        **_cell_fields(comparison, index, group, column),
        "baseline_column": section.baseline_column or "",
        "speedup_vs_baseline": row.vs_baseline.get(column),
        "speedup_vs_w0_cpu_decode": setting_row.vs_baseline_setting.get(column),
        "best_for_column": best.best is group,
        "best_vs_baseline_best": best.vs_baseline if best.best is group else None,
        "speedup_vs_baseline_within_noise": within_noise(group, base) if column != section.baseline_column else None,
    }


def csv_rows(comparison: Comparison) -> list[Row]:
    """One row per (section, column, setting, point) group, numbers unrounded; invalid cells last in a section."""
    rows = []
    for index, section in enumerate(comparison.sections, 1):
        rows += [_group_row(comparison, index, section, row, setting_row, column)
                 for row, setting_row in zip(section.rows, section.setting_rows) for column in row.cells]
        rows += [_cell_fields(comparison, index, group, group.accelerator) for group in section.invalid]
    return rows


def csv_fields(rows: list[Row]) -> tuple[str, ...]:
    """CSV_FIELDS, plus a MEASURED_SOMETIMES column only where some run measured it (never a column of blanks)."""
    return CSV_FIELDS + tuple(name for name in MEASURED_SOMETIMES if any(name in row for row in rows))


def rows_csv(rows: list[Row], fields: Sequence[str] | None = None) -> str:
    """Rows as CSV text: the given columns, else every column of the rows in order of appearance."""
    buffer = io.StringIO()
    names = list(fields) if fields is not None else list(dict.fromkeys(name for row in rows for name in row))
    writer = csv.DictWriter(buffer, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def to_csv(comparison: Comparison) -> str:
    rows = csv_rows(comparison)
    return rows_csv(rows, csv_fields(rows))


def quality_csvs(comparison: Comparison) -> dict[str, str]:
    """quality.csv (each cell per target) and headline.csv (each pair's time to target and quality verdict), where
    there are rows."""
    tables = {"quality.csv": quality_rows(comparison), "headline.csv": headline_quality_rows(comparison)}
    return {name: rows_csv(rows) for name, rows in tables.items() if rows}


def _spread_fields(name: str, spread: Spread | None, olympic: bool = False) -> Row:
    fields = {f"{name}_median": spread.median if spread else None, f"{name}_min": spread.minimum if spread else None,
              f"{name}_max": spread.maximum if spread else None}
    return {**fields, f"{name}_olympic_mean": spread.olympic if spread else None} if olympic else fields


def quality_record(stats: QualityStats) -> Row:
    """One cell's repeats for one target as plain numbers (medians, min, max; None where nothing was logged)."""
    finals: Row = {}
    for metric in TARGET_METRICS:
        finals.update(_spread_fields(metric, stats.final(metric)))
    return {
        "target": stats.key.target, "stop_at_target": stats.key.stops if stats.key.target else None,
        "n": stats.n, "reached": stats.reached if stats.key.target else None,
        "not_reached": stats.not_reached if stats.key.target else None, "invalid": stats.invalid,
        **_spread_fields(SAMPLES_TO_TARGET_METRIC, stats.samples_to_target, olympic=True),
        **_spread_fields(TIME_TO_TARGET_METRIC, stats.time_to_target, olympic=True),
        EVAL_SAMPLES_INTERVAL_METRIC: " ".join(f"{v:g}" for v in stats.intervals),
        TARGET_BEST_METRIC: stats.best_value, **finals, "run_ids": " ".join(stats.run_ids),
    }


def quality_rows(comparison: Comparison) -> list[Row]:
    """One row per (section, cell, target) with anything to show."""
    rows = []
    for index, section in enumerate(comparison.sections, 1):
        cells = {(row.label, column): row.cells[column] for row in section.rows for column in row.cells}
        for label, column, stats in placed_quality(section):
            cell = cells[(label, column)]
            rows.append({"section": index, "column": column, ACCELERATOR_TAG: cell.accelerator, "setting": label,
                         **quality_record(stats)})
    return rows


def _pair_row(pair: HeadlinePair, which: str, cells: CellPair, shared: QualityPair) -> Row:
    gaudi_samples, gpu_samples = shared.gaudi.samples_to_target, shared.gpu.samples_to_target
    gaudi_time, gpu_time = shared.gaudi.time_to_target, shared.gpu.time_to_target
    gaps = shared.gaps
    return {
        "section": pair.section_index, "place": pair_place(pair), GAUDI_SIDE: pair.gaudi, GPU_SIDE: pair.gpu,
        "point": pair.point.label, "cells": which, "gaudi_setting": cells.gaudi.setting.label,
        "gpu_setting": cells.gpu.setting.label, "target": shared.key.target,
        "stop_at_target": shared.key.stops if shared.key.target else None,
        "samples_per_second_speedup": cells.speedup, "time_to_target_speedup": shared.time_to_target_speedup,
        "samples_to_target_ratio": shared.samples_ratio,
        "gaudi_samples_to_target": gaudi_samples.median if gaudi_samples else None,
        "gpu_samples_to_target": gpu_samples.median if gpu_samples else None,
        "gaudi_time_to_target_seconds": gaudi_time.median if gaudi_time else None,
        "gpu_time_to_target_seconds": gpu_time.median if gpu_time else None,
        "quality_compared": shared.compared, "quality_differs": gaps_text(gaps) if gaps else "",
    }


def pair_quality_rows(pair: HeadlinePair) -> list[Row]:
    """Best vs best, then the matched cells where they are other cells: a row per QualityKey both sides share."""
    found = [(BEST, pair.best)]
    if pair.matched is not None and not pair.matched.same_cells(pair.best):
        found.append((MATCHED, pair.matched))
    return [_pair_row(pair, which, cells, shared) for which, cells in found for shared in quality_pairs(cells)
            if shared.key.target or shared.compared]  # published numbers have no quality to row


def headline_quality_rows(comparison: Comparison) -> list[Row]:
    """headline.csv: every headline pair's quality rows."""
    return [row for pair in comparison.headline for row in pair_quality_rows(pair)]


def headline_quality_fields(pair: HeadlinePair) -> Row:
    """What a headline record carries beside its samples/s ratios: the columns' texts."""
    verdict = quality_cell(pair)
    return {"matched_to_target": to_target_cell(pair.matched, pair.gaudi, pair.gpu),
            "best_to_target": to_target_cell(pair.best, pair.gaudi, pair.gpu),
            "quality_differs": verdict if DIFFERS in verdict else ""}


def _cell_record(group: GroupStats) -> Row:
    return {"median": group.median, "n": group.n, "min": group.minimum, "max": group.maximum,
            PEAK_MEMORY_METRIC: group.peak_memory_gb, "run_ids": list(group.run_ids)}


def _pair_record(cells: CellPair) -> Row:
    return {GAUDI_SIDE: _cell_record(cells.gaudi), GPU_SIDE: _cell_record(cells.gpu), "speedup": cells.speedup,
            "within_noise": cells.within_noise}


def published_pair_records(pairs: Sequence[PublishedPair]) -> list[Row]:
    """The published pairs across batch sizes as plain numbers (JSON)."""
    return [{
        "source": pair.source, "caption": pair.caption, GAUDI_SIDE: pair.gaudi, GPU_SIDE: pair.gpu,
        "gaudi_batch": pair.gaudi_batch, "gpu_batch": pair.gpu_batch, "rule": PAIR_RULE,
        "rows": [{"gaudi_setting": setting_text(row.cells.gaudi), "gpu_setting": setting_text(row.cells.gpu),
                  "matched": row.matched, **_pair_record(row.cells)} for row in pair.rows],
    } for pair in pairs]


def headline_records(comparison: Comparison, nested: bool = True) -> list[Row]:
    """The headline pairs as plain numbers (JSON; `nested=False`: one flat row each, for log_table)."""
    records = []
    for pair in comparison.headline:
        record = {
            "section": pair.section_index, "place": pair_place(pair), "source": pair.section.source,
            GAUDI_SIDE: pair.gaudi, GPU_SIDE: pair.gpu, "point": pair.point.label,
            "matched_setting": pair.matched_setting.label if pair.matched_setting else None,
            "matched_speedup": pair.matched.speedup if pair.matched else None,
            "matched_within_noise": pair.matched.within_noise if pair.matched else False,
            "gaudi_best_setting": pair.best.gaudi.setting.label, "gpu_best_setting": pair.best.gpu.setting.label,
            "best_vs_best": pair.best.speedup, "best_within_noise": pair.best.within_noise,
            "gaudi_best_usd_per_million_samples": usd_per_million_samples(pair.best.gaudi, comparison.prices),
            "gpu_best_usd_per_million_samples": usd_per_million_samples(pair.best.gpu, comparison.prices),
            "why": pair.why, **headline_quality_fields(pair),
        }
        if nested:
            record["every_setting"] = [{"setting": cells.setting.label, **_pair_record(cells)}
                                       for cells in pair.every_setting]
            record["quality"] = pair_quality_rows(pair)
        records.append(record)
    return records


def scaling_records(comparison: Comparison) -> list[Row]:
    """Each device count of each scaling line: samples/s, per device, efficiency against the line's base."""
    return [{"section": index, "line": p.line.label, ACCELERATOR_TAG: p.line.accelerator, "column": p.line.column,
             "setting": p.line.setting.label, "fixed": p.line.fixed.label, "devices": p.devices,
             "samples_per_second": p.cell.median, "n": p.cell.n, "min": p.cell.minimum, "max": p.cell.maximum,
             "per_device": p.per_device, "base_devices": p.base_devices, "scaling_efficiency": p.efficiency,
             "all_reduce_share": p.all_reduce_share}
            for index, section in enumerate(comparison.sections, 1) for p in scaling_points(section)]


def to_json(comparison: Comparison, caveats: Mapping[str, Sequence[str]] | None = None) -> str:
    """Headline, sections with their config, axes, differences, baseline, per-group rows and scaling."""
    rows, scaling, quality = csv_rows(comparison), scaling_records(comparison), quality_rows(comparison)
    sections = [
        {"index": i, "heading": section_heading(s), "source": s.source, "published": s.published,
         "throughput_warmup_steps": s.warmup, "config": s.config, "differences": s.differences,
         "axes": list(s.axes), "points": [p.label for p in s.points],
         "columns": s.columns, "baseline_column": s.baseline_column,
         "groups": [r for r in rows if r["section"] == i], "scaling": [r for r in scaling if r["section"] == i],
         "quality": [r for r in quality if r["section"] == i]}
        for i, s in enumerate(comparison.sections, 1)
    ]
    document = {
        "metric": THROUGHPUT_METRIC, "baseline": comparison.baseline,
        "allow_diff": list(comparison.allow_diff), "run_count": comparison.run_count,
        "left_out": dict(comparison.left_out), "experiments": comparison.experiments,
        "notes": comparison.notes, "headline": headline_records(comparison),
        "published_pairs": published_pair_records(comparison.published_pairs),
        "prices": {"usd_per_device_hour": comparison.prices.usd_per_device_hour,
                   "source": comparison.prices.source},
        "sections": sections,
        "published_caveats": {source: list(lines) for source, lines in (caveats or {}).items()},
    }
    return json.dumps(document, indent=2, default=str)
