"""The tracked part of `train`: start the run, fit, measure, evaluate, log the model, end the run."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..config import to_cli_args
from ..contract import (
    ADVICE_TAG,
    CPU_DECODED_METRIC,
    ERROR_TAG,
    INPUT_BOUND_TAG,
    PEAK_MEMORY_METRIC,
    RESUMED_FROM_TAG,
    RUN_KIND_TAG,
    RUN_KIND_TRAIN,
    RUNTIME_METRIC,
    THROUGHPUT_METRIC,
    THROUGHPUT_NOTE_TAG,
    TRAIN_LOSS_METRIC,
    WAIT_METRIC,
    input_bound_label,
)
from ..errors import ConfigError, LaunchFailed
from ..launch.collectives import all_gather_objects, barrier, broadcast_from_main
from .output_folder import writes_into
from .record import describe, device_tags, run_name, start_tags, train_params
from .result import TrainResult
from .resume import checkpoint_to_resume, remember_run, run_to_resume

log = logging.getLogger(__name__)
FLUSH_TIMEOUT = float(os.environ.get("BRIDGETOWER_FLUSH_TIMEOUT", "120"))


def start_session(config, prepared):
    """Rank 0's run: new, resumed (`resume=true`) or the one `mlflow run` / a sweep created."""
    from ..tracking.context import context_tags
    from ..tracking.session import RunSession

    resume_id = run_to_resume(config)
    tags = {**context_tags(), **start_tags(config, prepared)}
    return RunSession.start(config.experiment_name, run_name(config, prepared.device.kind), tags, resume_id)


def fit_and_record(config, prepared, ranks, tracked: bool = True) -> TrainResult:
    """Train `prepared`; only rank 0 (and only when tracked) talks to MLflow. No run is left RUNNING."""
    session = start_session(config, prepared) if ranks.is_main and tracked else None
    try:
        return _fit(config, prepared, ranks, session)
    except BaseException as exc:
        if session is not None:
            status = "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED"
            if isinstance(exc, ConfigError) and session.previous_status:
                status = session.previous_status  # a refused resume leaves the run as it was
            else:
                session.set_tags({ERROR_TAG: str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__})
            session.finish(status, min(FLUSH_TIMEOUT, 30))
        raise


def _fit(config, prepared, ranks, session) -> TrainResult:
    from ..model.load import count_parameters
    from ..tracking.null_sink import NullSink
    from .evaluate import evaluate
    from .observe import Observation
    from .trainer import build_trainer

    if session:
        from ..tracking.dataset_inputs import log_dataset_inputs

        with writes_into(config.output_dir):
            remember_run(config.output_dir, session.run_id)
        log_dataset_inputs(config, prepared.data)
    run_id = broadcast_from_main(session.run_id if session else os.environ.get("MLFLOW_RUN_ID"), ranks)
    prepared.args.output_dir = str(Path(config.output_dir) / (run_id or "run"))
    trainer, throughput = build_trainer(config, prepared, session.buffer if session else NullSink())
    if session:
        session.log_params(train_params(config, prepared, count_parameters(prepared.loaded.model)))
    observation = Observation(prepared, session, ranks)
    throughput.window = observation.window  # energy is read at the throughput window's two instants
    checkpoint = checkpoint_to_resume(config, prepared.args.output_dir)
    if checkpoint:
        log.info("resuming run %s from %s", run_id, checkpoint)
    try:
        with writes_into(config.output_dir):
            output = trainer.train(resume_from_checkpoint=checkpoint)
    finally:
        observation.stop()
    if session and config.resume:
        session.set_tags({RESUMED_FROM_TAG: str(throughput.start_step)})  # the checkpoint it continued from
    metrics = _measured(prepared, throughput, output, ranks)
    metrics.update(evaluate(trainer, prepared, config, ranks.is_main))
    peak = prepared.adapter.peak_memory_gb()
    if peak is not None:
        metrics[PEAK_MEMORY_METRIC] = peak
    if not session:
        barrier(ranks)
        return TrainResult(run_id, metrics)
    found, tags = observation.findings(config, metrics)
    metrics.update(found)
    session.set_tags(tags)
    version = _record(config, prepared, session, trainer, metrics, tags[ADVICE_TAG])
    barrier(ranks)
    left = session.finish("FINISHED", FLUSH_TIMEOUT)
    return TrainResult(session.run_id, metrics, version, left, str(session.buffer.spill_path) if left else None)


def _measured(prepared, throughput, output, ranks) -> dict:
    """Steady-state figures of every rank combined (the Trainer's own samples/s follows another rule per
    accelerator: GaudiTrainer leaves warmup out, Trainer does not; it is not logged)."""
    from ..telemetry.throughput import combine_ranks

    args = prepared.args
    per_rank = all_gather_objects(throughput.result(args.per_device_train_batch_size
                                                    * args.gradient_accumulation_steps), ranks)
    metrics = {**combine_ranks(per_rank), RUNTIME_METRIC: output.metrics.get(RUNTIME_METRIC),
               TRAIN_LOSS_METRIC: output.training_loss}
    if prepared.device_loader is not None:
        metrics[CPU_DECODED_METRIC] = sum(all_gather_objects(prepared.device_loader.cpu_decoded_images(), ranks))
    return metrics


def _record(config, prepared, session, trainer, metrics, advice: str) -> str | None:
    """Final metrics, tags and description into the run's buffer; the model logged. Returns its version."""
    from ..model.publish import publish_model

    bound = input_bound_label(metrics[WAIT_METRIC])
    session.buffer.log_metrics({k: float(v) for k, v in metrics.items() if v is not None}, trainer.state.global_step)
    session.set_tags({INPUT_BOUND_TAG: bound})
    if THROUGHPUT_METRIC not in metrics:
        session.set_tags({THROUGHPUT_NOTE_TAG: f"no steady-state throughput: the run (resumed) had no step left "
                                               f"after the {config.throughput_warmup_steps} warmup steps"})
    session.set_description(describe(config, prepared, metrics, bound, advice))
    if not config.log_model:
        return None
    with writes_into(config.output_dir):
        return publish_model(config, prepared, session, trainer, metrics)


def launch_tracked(config, adapter, device) -> TrainResult:
    """devices > 1 without an outer launcher: create the run, start the ranks, settle the run's status."""
    from mlflow.tracking import MlflowClient

    from ..launch.self_launch import launch_ranks
    from ..tracking.context import context_tags
    from ..tracking.runs import FAILED, FINISHED, create_named_run, settle_run

    tags = {**context_tags(), **device_tags(device), RUN_KIND_TAG: RUN_KIND_TRAIN}
    run_id = create_named_run(config.experiment_name, run_name(config, device.kind), tags)
    code = launch_ranks(adapter.launch_command(device, ["train", *to_cli_args(config)]), run_id)
    client = MlflowClient()
    settle_run(client, run_id, FINISHED if code == 0 else FAILED, f"a rank exited with status {code}")
    if code != 0:
        raise LaunchFailed(f"devices: {config.devices} ranks were launched and one failed (exit {code}); "
                           f"see the rank output above; run {run_id} is marked FAILED")
    return TrainResult(run_id, dict(client.get_run(run_id).data.metrics))
