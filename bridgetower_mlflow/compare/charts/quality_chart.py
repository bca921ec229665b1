"""time_to_quality.png: the race in one picture. Per section and target, the target's metric at each evaluation
against wall time (MLPerf's clock) and against training samples; one line per cell (its median repeat by time to
the target, drawn as it ran; each repeat faint behind it), the target as a dashed line."""

from __future__ import annotations

import math
from pathlib import Path

from ...target import Target
from ..analysis.quality import QualityStats
from ..analysis.speedups import ConfigSection
from ..read.eval_series import SERIES_RUNS, SERIES_RUNS_PER_CELL, EvalSeries, SeriesSet, chart_groups
from .plotting import Axis, Pyplot, save, section_title, wrapped

CHART_FILE = "time_to_quality.png"
X_AXES = ((0, "wall time from the first training step, s (evaluations included)"), (1, "training samples"))
Line = tuple[str, list[EvalSeries]]  # (label, the repeats' series)
Panel = tuple[ConfigSection, QualityStats, list[Line]]  # one row of the chart: a section and one of its targets


def median_repeat(series: list[EvalSeries], target: Target | None) -> EvalSeries:
    """The repeat whose time to the target is the median (the lower one of an even count; a repeat that never
    reached it counts as the slowest): a path one run really took, never a mix of coordinates of several."""
    def to_target(repeat: EvalSeries) -> float:
        reached = (p[0] for p in repeat.points if target is not None and target.reached(p[2]))
        return next(reached, math.inf)

    ranked = sorted(series, key=to_target)
    return ranked[(len(ranked) - 1) // 2]


def _panels(sections: list[ConfigSection], read: SeriesSet) -> list[Panel]:
    """Each section and target with a drawn series, its lines in table order."""
    order = {id(section): index for index, section in enumerate(sections)}
    panels: dict[tuple[int, str], Panel] = {}
    for section, label, column, stats in chart_groups(sections):
        series = [read.series[run_id] for run_id in stats.run_ids if run_id in read.series]
        series = [s for s in series if s.points]
        if series:
            place = (id(section), stats.key.label)
            panels.setdefault(place, (section, stats, []))[2].append((f"{column} {label}".strip(), series))
    return sorted(panels.values(), key=lambda panel: (order[id(panel[0])], panel[1].key.sort_key()))


def _draw(axis: Axis, panel: Panel, x: int, x_label: str) -> None:
    section, stats, lines = panel
    for label, series in lines:
        middle = median_repeat(series, stats.target).points
        drawn = axis.plot([p[x] for p in middle], [p[2] for p in middle], marker="o", linewidth=2,
                          label=f"{label} (median repeat of {len(series)})")
        for repeat in series if len(series) > 1 else []:
            axis.plot([p[x] for p in repeat.points], [p[2] for p in repeat.points], linewidth=0.8, alpha=0.3,
                      color=drawn[0].get_color())
    target = stats.target
    if target is not None:
        axis.axhline(target.value, color="black", linestyle="--", linewidth=1, label=f"target {stats.key.label}")
        axis.set_ylabel(target.metric, fontsize=8)
    axis.set_xlabel(x_label, fontsize=8)
    title = section_title(section) if x == 0 else f"the same evaluations against {x_label}"
    axis.set_title(wrapped(title, 70), fontsize=8)
    axis.legend(fontsize=7)


def write_quality_chart(plt: Pyplot, sections: list[ConfigSection], read: SeriesSet, output_dir: Path) -> list[Path]:
    """time_to_quality.png, a row per section and target whose runs logged evaluations; nothing otherwise."""
    panels = _panels(sections, read)
    if not panels:
        return []
    figure, axes = plt.subplots(len(panels), len(X_AXES), figsize=(13, 4.6 * len(panels)), squeeze=False)
    for row, panel in zip(axes, panels):
        for axis, (x, x_label) in zip(row, X_AXES):
            _draw(axis, panel, x, x_label)
    if read.left_out:
        figure.suptitle(f"{read.left_out} runs with a target not drawn (at most {SERIES_RUNS_PER_CELL} per cell, "
                        f"{SERIES_RUNS} in all: each costs three metric-history reads)", fontsize=9)
    return [save(plt, figure, output_dir / CHART_FILE)]
