"""Measure: every figure the ranks combine (each all_gather of a run happens here), then evaluation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import TrainConfig
    from ..launch.ranks import RankInfo
    from .prepare import Prepared
    from .result import Fitted

from ..contract import CPU_DECODED_METRIC, PEAK_MEMORY_METRIC, RUNTIME_METRIC, TRAIN_LOSS_METRIC
from ..launch.collectives import all_gather_objects
from .evaluate import evaluate


def measure(config: TrainConfig, prepared: Prepared, fitted: Fitted, ranks: RankInfo) -> dict[str, Any]:
    """Steady-state figures of every rank combined, the evaluation, and the device's peak memory.

    The Trainer's own samples/s follows another rule per accelerator (GaudiTrainer leaves warmup out,
    Trainer does not): it is not logged.
    """
    from ..telemetry.throughput import combine_ranks

    args = prepared.args
    per_rank = all_gather_objects(fitted.throughput.result(args.per_device_train_batch_size
                                                           * args.gradient_accumulation_steps), ranks)
    metrics = {**combine_ranks(per_rank), RUNTIME_METRIC: fitted.output.metrics.get(RUNTIME_METRIC),
               TRAIN_LOSS_METRIC: fitted.output.training_loss}
    if prepared.device_loader is not None:
        metrics[CPU_DECODED_METRIC] = sum(all_gather_objects(prepared.device_loader.cpu_decoded_images(), ranks))
    metrics.update(evaluate(fitted.trainer, prepared, config, ranks.is_main))
    peak = prepared.adapter.peak_memory_gb()
    if peak is not None:
        metrics[PEAK_MEMORY_METRIC] = peak
    return metrics
