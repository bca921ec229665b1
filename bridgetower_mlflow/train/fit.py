"""Fit: the trainer with its telemetry around it (rank 0 observes; every rank trains)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..environment import DEFAULT_PROGRESS_SECONDS
from ..errors import NothingTrained
from ..launch.signals import Stopped
from .checkpoints.output_folder import writes_into
from .checkpoints.resume import checkpoint_to_resume
from .result import Fitted
from .trainer import build_trainer

if TYPE_CHECKING:
    from ..config import TrainConfig
    from ..launch.ranks import RankInfo
    from ..telemetry.steps.step_timing import StepTimingCallback
    from ..telemetry.system.energy import EnergyWindow
    from ..tracking.session import RunSession
    from .prepare import Prepared
    from .run import NullRun, TrackedRun

log = logging.getLogger(__name__)


def fit(config: TrainConfig, prepared: Prepared, run: TrackedRun | NullRun, ranks: RankInfo,
        progress_s: float = DEFAULT_PROGRESS_SECONDS, energy: EnergyWindow | None = None) -> Fitted:
    """Train `prepared` to its end (or from its checkpoint on a resume); metrics go to the run's sink, and
    `energy` (the observation's window, where there is one) is read at the throughput window's two instants."""
    trainer = None
    try:
        trainer, throughput = build_trainer(config, prepared, run.sink, progress_s, energy)
        checkpoint = checkpoint_to_resume(config, str(prepared.args.output_dir))
        if checkpoint:
            log.info("resuming run %s from %s", run.run_id, checkpoint)
        with writes_into(config.output_dir):
            output = trainer.train(resume_from_checkpoint=checkpoint)
    except Stopped as exc:
        raise exc.at(step=trainer.state.global_step if trainer is not None else None) from None
    if trainer.state.global_step == 0:
        raise _nothing_trained(prepared.args, len(prepared.data.train))
    if config.resume:
        run.resumed_from(throughput.start_step)  # the checkpoint it continued from
    return Fitted(trainer, throughput, output)


def log_profile(fitted: Fitted, output_dir: Path, session: RunSession | None) -> None:
    """The profiler window's trace and top-ops table under the run's profile/ artifacts (fails soft)."""
    from ..contract import PROFILE_ARTIFACT_DIR, PROFILE_TOP_OPS_FILE

    timing: StepTimingCallback | None = fitted.trainer.step_timing
    profiler = timing.profiler if timing is not None else None
    if profiler is None or session is None:
        return
    try:
        exported = profiler.export(output_dir / PROFILE_ARTIFACT_DIR)
        if exported is None:
            log.warning("profile_steps %d-%d: training ended before the window; no profile", profiler.first,
                        profiler.last)
            return
        trace, table = exported
        session.log_artifact(trace, PROFILE_ARTIFACT_DIR)
        session.client.log_table(session.run_id, table, PROFILE_TOP_OPS_FILE)
    except Exception as exc:  # noqa: BLE001 - telemetry fails soft
        log.warning("the profile was not logged: %s", str(exc).splitlines()[0][:200] if str(exc) else exc)


def _nothing_trained(args: Any, rows: int) -> NothingTrained:
    return NothingTrained(f"max_steps: the run took 0 optimizer steps (max_steps {args.max_steps}, num_train_epochs "
                          f"{args.num_train_epochs:g}, {rows} training rows in batches of "
                          f"{args.per_device_train_batch_size}); allowed: settings that train at least one step")
