"""compare's results as MLflow can chart them: headline ratios and the gate's verdict as metrics, tables for
mlflow.load_table. Keys are built from what the compared runs were, so two compares of the same runs agree."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ...contract import (
    COMPARE_CELLS_TABLE,
    COMPARE_HEADLINE_TABLE,
    COMPARE_QUALITY_TABLE,
    COMPARE_SCALING_TABLE,
    GATE_PASSED_METRIC,
    GATE_QUALITY_FAILED_METRIC,
    GATE_WORST_RATIO_METRIC,
    METRICS_PER_BATCH,
    SAMPLES_TO_TARGET_RATIO_METRIC_PREFIX,
    SPEEDUP_METRIC_PREFIX,
    TIME_TO_TARGET_SPEEDUP_METRIC_PREFIX,
)
from ..analysis.axes import AXIS_KEYS, AXIS_LETTERS
from ..analysis.gate import GateResult
from ..analysis.grouping import CONFIG_KEYS, SHORT_KEY_NAMES, GroupStats, Setting
from ..analysis.headline import CellPair, HeadlinePair
from ..analysis.quality_pairs import quality_pairs
from ..comparison import Comparison
from .export import Row, csv_rows, headline_records, quality_rows, scaling_records

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

BEST = "best"  # the key part of a best-vs-best ratio
WARMUP_KEY = "throughput_warmup_steps"
TARGET_KEY = "target"  # a condition of time-to-target keys where pairs ran several targets
COMPARISONS = ((">=", "ge"), ("<=", "le"), (">", "gt"), ("<", "lt"))
Measured = list[tuple[HeadlinePair, str, float, dict[str, str]]]  # (pair, what, ratio, conditions)
UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")  # MLflow keys allow more (space, /, :) but these read best in the UI


def key_part(text: str) -> str:
    return UNSAFE.sub("_", str(text)).strip("_") or "none"


def setting_part(setting: Setting) -> str:
    """`w2_cpu`, `w1_device`, `w0_cpu-fallback`."""
    return key_part(f"w{setting.workers}_{setting.decode}")


def _conditions(pair: HeadlinePair, cell: GroupStats) -> dict[str, str]:
    return {**{key: str(cell.config.get(key, "")) for key in CONFIG_KEYS}, WARMUP_KEY: pair.section.warmup}


def _condition_part(key: str, value: str) -> str:
    if key == TARGET_KEY:
        return value
    if key in AXIS_LETTERS and AXIS_LETTERS[key]:
        return key_part(f"{AXIS_LETTERS[key]}{value}")  # b16, d2
    if key in AXIS_LETTERS:
        return key_part(value)  # the strategy names itself
    return key_part(f"{SHORT_KEY_NAMES.get(key, key).replace('/', '_')}_{value}")


def _ratios(pair: HeadlinePair) -> list[tuple[str, float, GroupStats]]:
    """(what, ratio, a cell it was measured on) for every setting both sides ran, and best vs best."""
    found = [(setting_part(cells.setting), cells.speedup, cells.gpu) for cells in pair.every_setting]
    found.append((BEST, pair.best.speedup, pair.best.gpu))
    return [(what, ratio, cell) for what, ratio, cell in found if ratio is not None]


def _keyed(prefix: str, measured: Measured) -> dict[str, float]:
    """`<prefix><gaudi>_vs_<gpu>.<what>[.<condition>...]`: conditions join the key only where they differ between
    the measured pairs, so a plain study keeps short keys and a sweep's curve points stay apart."""
    order = (*AXIS_KEYS, *(key for key in CONFIG_KEYS if key not in AXIS_KEYS), WARMUP_KEY, TARGET_KEY)
    varying = [key for key in order if len({c.get(key, "") for *_, c in measured}) > 1]
    metrics = {}
    for pair, what, ratio, conditions in measured:
        parts = [f"{key_part(pair.gaudi)}_vs_{key_part(pair.gpu)}", what,
                 *(_condition_part(key, conditions.get(key, "")) for key in varying)]
        metrics[prefix + ".".join(parts)] = ratio
    return metrics


def speedup_metrics(comparison: Comparison) -> dict[str, float]:
    """`speedup.<gaudi>_vs_<gpu>.<setting or best>[.<condition>...]` for every measured headline ratio."""
    return _keyed(SPEEDUP_METRIC_PREFIX, [(pair, what, ratio, _conditions(pair, cell))
                                          for pair in comparison.headline if not pair.section.published
                                          for what, ratio, cell in _ratios(pair)])


def target_part(target: str) -> str:
    """`eval_recall_at_5>=0.2` -> `eval_recall_at_5_ge_0.2` (the comparison kept, in characters keys allow)."""
    for sign, word in COMPARISONS:
        target = target.replace(sign, f"_{word}_")
    return key_part(target)


def _every_cells(pair: HeadlinePair) -> list[tuple[str, CellPair]]:
    return [*((setting_part(cells.setting), cells) for cells in pair.every_setting), (BEST, pair.best)]


def time_to_target_metrics(comparison: Comparison) -> dict[str, float]:
    """`time_to_target_speedup.<gaudi>_vs_<gpu>.<setting or best>[...]` and `samples_to_target_ratio...` for every
    measured pair of cells that reached the same target (the target joins the key where pairs ran several)."""
    speedups: Measured = []
    samples: Measured = []
    for pair in (p for p in comparison.headline if not p.section.published):
        for what, cells in _every_cells(pair):
            for shared in (q for q in quality_pairs(cells) if q.key.target):
                conditions = {**_conditions(pair, cells.gpu), TARGET_KEY: target_part(shared.key.label)}
                if shared.time_to_target_speedup is not None:
                    speedups.append((pair, what, shared.time_to_target_speedup, conditions))
                if shared.samples_ratio is not None:
                    samples.append((pair, what, shared.samples_ratio, conditions))
    return {**_keyed(TIME_TO_TARGET_SPEEDUP_METRIC_PREFIX, speedups),
            **_keyed(SAMPLES_TO_TARGET_RATIO_METRIC_PREFIX, samples)}


def gate_metrics(gate: GateResult | None) -> dict[str, float]:
    """`gate_passed` (1 or 0) and `gate_worst_ratio` (the lowest current / gated median); none unchecked."""
    if gate is None or not gate.checks:
        return {}
    worst = min(check.current.median / check.gated for check in gate.checks if check.gated)
    metrics = {GATE_PASSED_METRIC: 1.0 if gate.passed else 0.0, GATE_WORST_RATIO_METRIC: worst}
    if gate.quality:
        metrics[GATE_QUALITY_FAILED_METRIC] = float(len(gate.quality_failed))
    return metrics


def columns(rows: list[Row]) -> dict[str, list[Any]]:
    """Rows -> one list per column (every column in every row; None where a row has none)."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    return {name: [row.get(name) for row in rows] for name in names}


def result_tables(comparison: Comparison) -> dict[str, dict[str, list[Any]]]:
    """artifact file -> table, for each table with rows: cells, headline (flat), scaling."""
    tables = {COMPARE_CELLS_TABLE: csv_rows(comparison), COMPARE_HEADLINE_TABLE: headline_records(comparison, False),
              COMPARE_SCALING_TABLE: scaling_records(comparison), COMPARE_QUALITY_TABLE: quality_rows(comparison)}
    return {name: columns(rows) for name, rows in tables.items() if rows}


def log_results(client: MlflowClient, run_id: str, comparison: Comparison, gate: GateResult | None) -> dict[str, float]:
    """Log the metrics and tables on the compare run; returns the metrics."""
    import time

    from mlflow.entities import Metric

    metrics = {**speedup_metrics(comparison), **time_to_target_metrics(comparison), **gate_metrics(gate)}
    now = int(time.time() * 1000)
    logged = [Metric(key, value, now, 0) for key, value in metrics.items()]
    for start in range(0, len(logged), METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=logged[start:start + METRICS_PER_BATCH])
    for artifact_file, table in result_tables(comparison).items():
        client.log_table(run_id, table, artifact_file)
    return metrics
