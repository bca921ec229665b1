"""Fit: the trainer with its telemetry around it (rank 0 observes; every rank trains)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..errors import NothingTrained
from ..launch.signals import Stopped
from .observe import Observation
from .output_folder import writes_into
from .result import Fitted
from .resume import checkpoint_to_resume
from .trainer import build_trainer

if TYPE_CHECKING:
    from ..config import TrainConfig
    from ..launch.ranks import RankInfo
    from .prepare import Prepared
    from .run import NullRun, TrackedRun

log = logging.getLogger(__name__)


def fit(config: TrainConfig, prepared: Prepared, run: TrackedRun | NullRun, ranks: RankInfo) -> Fitted:
    """Train `prepared` to its end (or from its checkpoint on a resume); metrics go to the run's sink."""
    trainer, throughput = build_trainer(config, prepared, run.sink)
    observation = Observation(prepared, run.session, ranks)
    throughput.window = observation.window  # energy is read at the throughput window's two instants
    checkpoint = checkpoint_to_resume(config, str(prepared.args.output_dir))
    if checkpoint:
        log.info("resuming run %s from %s", run.run_id, checkpoint)
    try:
        with writes_into(config.output_dir):
            output = trainer.train(resume_from_checkpoint=checkpoint)
    except Stopped as exc:
        exc.step = trainer.state.global_step
        raise
    finally:
        observed = observation.stop()
    if trainer.state.global_step == 0:
        raise _nothing_trained(prepared.args, len(prepared.data.train))
    if config.resume:
        run.resumed_from(throughput.start_step)  # the checkpoint it continued from
    return Fitted(trainer, throughput, output, observed)


def _nothing_trained(args: Any, rows: int) -> NothingTrained:
    return NothingTrained(f"max_steps: the run took 0 optimizer steps (max_steps {args.max_steps}, num_train_epochs "
                          f"{args.num_train_epochs:g}, {rows} training rows in batches of "
                          f"{args.per_device_train_batch_size}); allowed: settings that train at least one step")
