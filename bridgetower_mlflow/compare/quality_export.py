"""Quality as plain rows: each cell's quality per target (quality.csv, the JSON's sections, a log_table), and each
headline pair's time to target and quality verdict per shared target (headline.csv, the JSON's headline)."""

from __future__ import annotations

from typing import Any

from ..contract import (
    ACCELERATOR_TAG,
    EVAL_SAMPLES_INTERVAL_METRIC,
    SAMPLES_TO_TARGET_METRIC,
    TARGET_BEST_METRIC,
    TARGET_METRICS,
    TIME_TO_TARGET_METRIC,
)
from .comparison import Comparison
from .headline import GAUDI_SIDE, GPU_SIDE, HeadlinePair
from .pairs import CellPair
from .quality import QualityStats, Spread
from .quality_pairs import QualityPair, quality_pairs
from .quality_tables import placed_quality, quality_cell, to_target_cell
from .quality_text import DIFFERS, gaps_text
from .tables import pair_place

Row = dict[str, Any]
BEST, MATCHED = "best", "matched"  # which cells of a headline pair a row is about


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
