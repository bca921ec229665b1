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
    from .result import Fitted

import dataclasses
import logging

from ..contract import (
    ACHIEVABLE_TFLOPS_METRIC,
    CPU_DECODED_METRIC,
    PEAK_MEMORY_METRIC,
    RUNTIME_METRIC,
    TRAIN_LOSS_METRIC,
)
from ..launch.collectives import all_gather_objects
from ..telemetry.phase_window import RankPhases, leave_out, slowest, window_figures
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
    if not with_findings:
        return Measured(metrics, {}, node_series)
    timing = fitted.trainer.step_timing
    if timing is not None:  # how this rank timed the step's phases (every rank times them alike)
        observed = dataclasses.replace(observed, phases=timing.report())
    found, tags = findings(config, prepared, metrics, observed)
    return Measured({**metrics, **found}, tags, node_series)


def _figures(config: TrainConfig, prepared: Prepared, fitted: Fitted, ranks: RankInfo) -> dict[str, Any]:
    from ..telemetry.throughput import combine_ranks

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
    metrics.update(evaluate(fitted.trainer, prepared, config, ranks.is_main))
    peak = prepared.adapter.peak_memory_gb()
    if peak is not None:
        metrics[PEAK_MEMORY_METRIC] = peak
    return metrics


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
