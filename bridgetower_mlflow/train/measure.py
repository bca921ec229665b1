"""Measure: every figure the ranks combine at the end (each all_gather after training happens here; the one
before it is the observation's, where each rank learns its node's ranks), the evaluation, and on a tracked run
the findings (what the figures mean): close only writes what this returns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import TrainConfig
    from ..launch.ranks import RankInfo
    from .observe import Observed
    from .prepare import Prepared
    from .quality import QualityCallback
    from .result import Fitted

import dataclasses
import logging

from ..config import quality_of
from ..contract import (
    ACHIEVABLE_TFLOPS_METRIC,
    CPU_DECODED_METRIC,
    EVAL_METRICS,
    EVAL_SAMPLES_INTERVAL_METRIC,
    EVALUATIONS_METRIC,
    PEAK_MEMORY_METRIC,
    RUNTIME_METRIC,
    TRAIN_LOSS_METRIC,
)
from ..launch.collectives import all_gather_objects
from ..telemetry.steps.phase_window import RankPhases, leave_out, slowest, window_figures
from .evaluate import evaluate
from .findings import findings
from .observe import gather_nodes
from .result import Measured

log = logging.getLogger(__name__)


def measure(config: TrainConfig, prepared: Prepared, fitted: Fitted, observed: Observed, ranks: RankInfo,
            with_findings: bool = True) -> Measured:
    """Steady-state figures of every rank combined, the evaluation, the device's peak memory, every node's
    worker series summed, and (`with_findings`: rank 0 of a tracked run) the findings over what was `observed`.

    The Trainer's own samples/s follows another rule per accelerator (GaudiTrainer leaves warmup out,
    Trainer does not): it is not logged.
    """
    metrics = _figures(config, prepared, fitted, ranks)
    observed, node_series = gather_nodes(observed, ranks)  # after the evaluation, on every rank alike
    quality = fitted.trainer.quality
    # the evaluation training ended with was logged at the last step as it ran: close does not log it again
    logged = tuple(EVAL_METRICS) if quality.at_step(fitted.trainer.state.global_step) else ()
    if not with_findings:
        return Measured(metrics, {}, node_series, logged)
    timing = fitted.trainer.step_timing
    if timing is not None:  # how this rank timed the step's phases (every rank times them alike)
        observed = dataclasses.replace(observed, phases=timing.report())
    found, tags = findings(config, prepared, metrics, observed)
    target = quality_of(config)
    if target is not None:
        from .quality import target_outcome  # its module imports transformers: not at the flow's import

        tags.update(target_outcome(target, quality.all(), None)[1])
    return Measured({**metrics, **found}, tags, node_series, logged)


def _figures(config: TrainConfig, prepared: Prepared, fitted: Fitted, ranks: RankInfo) -> dict[str, Any]:
    from ..telemetry.steps.throughput import combine_ranks

    args = prepared.args
    per_rank = all_gather_objects(fitted.throughput.result(args.per_device_train_batch_size
                                                           * args.gradient_accumulation_steps), ranks)
    phases = all_gather_objects(_rank_phases(fitted), ranks)
    per_rank = [leave_out(window, rank.left_out) for window, rank in zip(per_rank, phases, strict=True)]
    metrics = {**combine_ranks(per_rank), RUNTIME_METRIC: fitted.output.metrics.get(RUNTIME_METRIC),
               TRAIN_LOSS_METRIC: fitted.output.training_loss}
    metrics.update(window_figures(phases[slowest(per_rank)]))  # the slowest rank's window, like throughput's
    if prepared.device_loader is not None:
        metrics[CPU_DECODED_METRIC] = sum(all_gather_objects(prepared.device_loader.cpu_decoded_images(), ranks))
    if ranks.is_main:
        metrics.update(_achievable(prepared, fitted))
    quality = fitted.trainer.quality
    last = quality.at_step(fitted.trainer.state.global_step)  # the evaluation at the last step, on the clock
    metrics.update(evaluate(fitted.trainer, prepared, config, ranks.is_main, last.metrics if last else None))
    metrics.update(_quality(config, prepared, quality, ranks))
    peak = prepared.adapter.peak_memory_gb()
    if peak is not None:
        metrics[PEAK_MEMORY_METRIC] = peak
    return metrics


def _quality(config: TrainConfig, prepared: Prepared, quality: QualityCallback, ranks: RankInfo) -> dict[str, Any]:
    """The target's figures (samples to it summed over the ranks), the evaluations' count and interval in samples."""
    args = prepared.args
    rows = all_gather_objects(quality.reaching_rows(), ranks)
    figures: dict[str, Any] = {}
    if config.eval_steps:
        figures[EVAL_SAMPLES_INTERVAL_METRIC] = float(config.eval_steps * args.per_device_train_batch_size
                                                      * args.gradient_accumulation_steps * max(1, args.world_size))
    if quality.final:
        figures[EVALUATIONS_METRIC] = float(len(quality.all()))
    target = quality_of(config)
    if target is not None:
        from .quality import target_outcome

        counted = [r for r in rows if r is not None]
        samples = quality.prior.samples + sum(counted) if len(counted) == len(rows) else None
        figures.update(target_outcome(target, quality.all(), samples)[0])
    return figures


def _rank_phases(fitted: Fitted) -> RankPhases:
    timing = fitted.trainer.step_timing
    return timing.result() if timing is not None else RankPhases()


def _achievable(prepared: Prepared, fitted: Fitted) -> dict[str, float]:
    """device_achievable_tflops: this rank's device, the run's dtype (cached; measured once, fails soft)."""
    from ..telemetry.achievable_peak import achievable_tflops
    from .efficiency import peak_precision

    timing = fitted.trainer.step_timing.timing if fitted.trainer.step_timing is not None else None
    try:
        synchronize = timing.clock().synchronize if timing is not None else (lambda: None)
        device = prepared.device
        rate = achievable_tflops(prepared.args.device, peak_precision(prepared), synchronize, device.device_name,
                                 device.software)
    except Exception as exc:  # noqa: BLE001 - telemetry fails soft: the note says it was not measured
        log.warning("the device's matmul rate was not measured: %s", exc)
        return {}
    return {ACHIEVABLE_TFLOPS_METRIC: rate}
