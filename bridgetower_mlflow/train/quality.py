"""Time to quality: every evaluation during training at its step, the target, and MLPerf's clock.

The clock runs from the first training step's start (the Trainer's on_train_begin, before its first batch is
fetched: MLPerf's run_start) to the end of the evaluation that reached the target (the Trainer's own `evaluate`
returning), evaluations included. A resumed run's clock goes on from the checkpoint it continued from: what an
interruption threw away (the steps after that checkpoint, the restart) is not on it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from ..contract import (
    EVAL_CLOCK_METRIC,
    EVAL_METRICS,
    EVAL_TRAIN_SAMPLES_METRIC,
    SAMPLES_TO_TARGET_METRIC,
    STEPS_TO_TARGET_METRIC,
    TARGET_BEST_METRIC,
    TARGET_REACHED_TAG,
    TARGET_TAG,
    TIME_TO_TARGET_METRIC,
    TIME_TO_TARGET_TRAIN_METRIC,
)
from .checkpoints.wholeness import PREFIX

if TYPE_CHECKING:
    from ..target import Target
    from ..telemetry.sinks import MetricSink
    from ..telemetry.steps.trainer_meter import TrainerMeter

log = logging.getLogger(__name__)
STATE_FILE = "bridgetower-quality.json"  # in each checkpoint: the clock and the evaluations so far


@dataclass(frozen=True)
class Evaluation:
    """One evaluation: its global step, eval metrics, the clock at its end (evaluations' own seconds on it so
    far), the training rows up to it (all ranks), and this rank's rows in this attempt (None: an earlier one's)."""

    step: int
    metrics: dict[str, float]
    clock_seconds: float = 0.0
    eval_seconds: float = 0.0
    samples: int = 0
    rows: int | None = None
    checkpoint: bool = False  # a checkpoint was saved at its step


@dataclass(frozen=True)
class Prior:
    """What the attempts before a resume left in its checkpoint (zeros for a run that starts afresh)."""

    clock_seconds: float = 0.0
    eval_seconds: float = 0.0
    samples: int = 0
    evaluated: tuple[Evaluation, ...] = ()


class QualityCallback(TrainerCallback):
    """Evaluations on the clock; stops at the first that reaches `target` when `stop`; forces one at the last step
    when `final` (so the run's last evaluation is one of them, on the clock)."""

    def __init__(self, sink: MetricSink, meter: TrainerMeter, target: Target | None, stop: bool, final: bool) -> None:
        self.sink, self.meter, self.target, self.stop, self.final = sink, meter, target, stop, final
        self.world = 1
        self.prior = Prior()
        self.evaluations: list[Evaluation] = []  # this attempt's
        self._begin = 0.0
        self._training = False  # evaluations after training (measure's) are not on the clock
        self._pending: Evaluation | None = None  # evaluated; its span closes when `evaluate` returns

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.world = max(1, int(getattr(args, "world_size", 1) or 1))
        if state.global_step:
            self.prior = read_prior(Path(args.output_dir) / f"{PREFIX}{state.global_step}", self.target is not None)
        self._begin, self._training = time.perf_counter(), True

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._settle()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.final and state.global_step >= state.max_steps > 0:
            control.should_evaluate = True

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any) -> None:
        if not self._training:
            return
        values = {k: float(v) for k, v in (metrics or {}).items() if k in EVAL_METRICS}
        self._pending = Evaluation(state.global_step, values, rows=self.meter.rows)
        if self.target is None:
            return
        value = values.get(self.target.metric)
        if control.should_save and value is not None and self.target.better(value, best_value(self.all(), self.target)):
            # the checkpoint saved next is the best so far: Trainer's rotation keeps it (register_checkpoint=best)
            state.best_model_checkpoint = str(Path(args.output_dir) / f"{PREFIX}{state.global_step}")
        if self.stop and self.target.reached(value):
            control.should_training_stop = True

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._settle()
        last = self.evaluations[-1] if self.evaluations else None
        if last is not None and last.step == state.global_step:
            self.evaluations[-1] = replace(last, checkpoint=True)
        if args.should_save:
            now = time.perf_counter()
            write_prior(Path(args.output_dir) / f"{PREFIX}{state.global_step}", Prior(
                self._clock(now), self._eval_seconds(now), self._samples(self.meter.rows), self.all()))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._settle()
        self._training = False

    def all(self) -> tuple[Evaluation, ...]:
        """Every evaluation of the run so far, the earlier attempts' first."""
        return (*self.prior.evaluated, *self.evaluations)

    def at_step(self, step: int) -> Evaluation | None:
        """This attempt's evaluation at `step` (the last step's: measure reuses it instead of evaluating again)."""
        return next((e for e in reversed(self.evaluations) if e.step == step), None)

    def reaching_rows(self) -> int | None:
        """This rank's rows up to the evaluation that reached the target, when it ran in this attempt."""
        hit = first_reaching(self.all(), self.target) if self.target is not None else None
        return hit.rows if hit is not None else None

    def _settle(self) -> None:
        """The evaluation whose span has closed: on the clock, logged at its step."""
        pending, self._pending = self._pending, None
        if pending is None or not self.meter.evaluations.spans:
            return
        end = self.meter.evaluations.spans[-1][1]
        done = replace(pending, clock_seconds=self._clock(end), eval_seconds=self._eval_seconds(end),
                       samples=self._samples(pending.rows or 0))
        self.evaluations.append(done)
        for key, value in {**done.metrics, EVAL_CLOCK_METRIC: done.clock_seconds,
                           EVAL_TRAIN_SAMPLES_METRIC: float(done.samples)}.items():
            self.sink.log_metric(key, value, done.step)

    def _clock(self, now: float) -> float:
        return self.prior.clock_seconds + now - self._begin

    def _eval_seconds(self, now: float) -> float:
        return self.prior.eval_seconds + self.meter.evaluations.seconds_within(self._begin, now)

    def _samples(self, rows: int) -> int:
        """All ranks' rows so far, from this rank's (ranks run equal shards; measure sums the real ones)."""
        return self.prior.samples + rows * self.world


def read_prior(checkpoint: Path, wanted: bool) -> Prior:
    """The clock and evaluations a checkpoint carries; zeros (a warning where a target needs them) without."""
    try:
        data = json.loads((checkpoint / STATE_FILE).read_text())
        evaluated = tuple(Evaluation(**{**e, "rows": None}) for e in data.pop("evaluated"))
        return Prior(evaluated=evaluated, **data)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        if wanted:
            log.warning("%s has no readable %s (%s): time to target counts from this attempt's start",
                        checkpoint.name, STATE_FILE, exc)
        return Prior()


def write_prior(checkpoint: Path, prior: Prior) -> None:
    """The clock and the evaluations so far, into the checkpoint (before its completion marker)."""
    data = asdict(prior)  # the evaluations as dicts too
    (checkpoint / STATE_FILE).write_text(json.dumps(data))


def best_value(evaluations: tuple[Evaluation, ...], target: Target) -> float | None:
    """The best value of the target's metric any of `evaluations` saw."""
    best = None
    for evaluation in evaluations:
        value = evaluation.metrics.get(target.metric)
        if value is not None and target.better(value, best):
            best = value
    return best


def first_reaching(evaluations: tuple[Evaluation, ...], target: Target) -> Evaluation | None:
    return next((e for e in evaluations if target.reached(e.metrics.get(target.metric))), None)


def target_outcome(target: Target, evaluations: tuple[Evaluation, ...],
                   samples: int | None) -> tuple[dict[str, float], dict[str, str]]:
    """(metrics, tags) of a run with a target; `samples`: the ranks' rows up to the reaching evaluation, summed
    (None: take the evaluation's own count, an earlier attempt's)."""
    tags = {TARGET_TAG: str(target), TARGET_REACHED_TAG: "false"}
    metrics: dict[str, float] = {}
    best = best_value(evaluations, target)
    if best is not None:
        metrics[TARGET_BEST_METRIC] = best
    hit = first_reaching(evaluations, target)
    if hit is None:
        return metrics, tags
    tags[TARGET_REACHED_TAG] = "true"
    metrics.update({TIME_TO_TARGET_METRIC: hit.clock_seconds,
                    TIME_TO_TARGET_TRAIN_METRIC: hit.clock_seconds - hit.eval_seconds,
                    SAMPLES_TO_TARGET_METRIC: float(hit.samples if samples is None else samples),
                    STEPS_TO_TARGET_METRIC: float(hit.step)})
    return metrics, tags


def best_evaluated(evaluations: tuple[Evaluation, ...], target: Target, last_step: int,
                   kept: Callable[[int], bool]) -> Evaluation | None:
    """register_as's `best`: the evaluation best by the target's metric among the one at the last step (the final
    model) and those whose checkpoint is still `kept`; a tie goes to the later step."""
    best = None
    for evaluation in evaluations:
        value = evaluation.metrics.get(target.metric)
        if value is None or not (evaluation.step == last_step or (evaluation.checkpoint and kept(evaluation.step))):
            continue
        if best is None or not target.better(best.metrics[target.metric], value):
            best = evaluation
    return best
