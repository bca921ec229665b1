"""The time-to-quality race's points: each evaluation's target metric against the clock and the samples trained.

Only the charts need them, and only for runs with a target. A metric history costs one request per run and per
metric (three here), so the read is bounded: at most SERIES_RUNS_PER_CELL repeats of each cell and target, and
SERIES_RUNS in all, over the sections the charts draw; the chart names what it left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...contract import EVAL_CLOCK_METRIC, EVAL_TRAIN_SAMPLES_METRIC
from ..analysis.quality import QualityStats
from ..analysis.speedups import ConfigSection

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

SERIES_RUNS_PER_CELL = 5
SERIES_RUNS = 40  # x 3 histories: 120 requests at most, whatever the store holds
MAX_CHART_SECTIONS = 8  # the charts draw the first sections with rows only

Point = tuple[float, float, float]  # (clock seconds, training samples, the target metric's value) at one evaluation


@dataclass(frozen=True)
class EvalSeries:
    """One run's evaluations in step order, each as a Point (only steps where all three were logged)."""

    run_id: str
    points: tuple[Point, ...]


@dataclass(frozen=True)
class SeriesSet:
    """The series read for the charts, and how many target runs were left unread by the bounds."""

    series: Mapping[str, EvalSeries]  # run id -> its series
    left_out: int = 0


def chart_groups(sections: list[ConfigSection]) -> list[tuple[ConfigSection, str, str, QualityStats]]:
    """(section, row label, column, repeats of one target) for every cell with a target, in chart order."""
    return [(section, row.label, column, stats)
            for section in [s for s in sections if s.rows][:MAX_CHART_SECTIONS]
            for row in section.rows for column in section.columns if column in row.cells
            for stats in row.cells[column].quality() if stats.key.target]


def wanted_runs(sections: list[ConfigSection]) -> tuple[list[tuple[str, str]], int]:
    """((run id, target metric), ...) within the bounds, and how many target runs the bounds left out."""
    wanted: list[tuple[str, str]] = []
    total = 0
    for *_, stats in chart_groups(sections):
        target = stats.target
        total += stats.n
        room = min(SERIES_RUNS_PER_CELL, SERIES_RUNS - len(wanted))
        if target is not None and room > 0:
            wanted += [(run_id, target.metric) for run_id in stats.run_ids[:room]]
    return wanted, total - len(wanted)


def read_series(client: MlflowClient, run_id: str, metric: str) -> EvalSeries:
    """The run's evaluations: the metric, the clock and the samples, joined on the global step."""
    histories = [{m.step: float(m.value) for m in client.get_metric_history(run_id, key)}
                 for key in (EVAL_CLOCK_METRIC, EVAL_TRAIN_SAMPLES_METRIC, metric)]
    clock, samples, values = histories
    steps = sorted(set(clock) & set(samples) & set(values))
    return EvalSeries(run_id, tuple((clock[s], samples[s], values[s]) for s in steps))


def fetch_eval_series(client: MlflowClient, sections: list[ConfigSection]) -> SeriesSet:
    """The bounded read the time-to-quality chart needs (nothing at all where no run had a target)."""
    wanted, left_out = wanted_runs(sections)
    return SeriesSet({run_id: read_series(client, run_id, metric) for run_id, metric in wanted}, left_out)
