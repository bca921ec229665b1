"""The tracked part of `train`: start the run, fit, measure, evaluate, log the model, end the run."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .errors import ConfigError
from .telemetry.loader_wait import input_bound_label
from .telemetry.throughput import combine_ranks
from .tracking import train_record
from .launch import gather_to_main
from .training import FLUSH_TIMEOUT, TrainResult, last_run, remember_run, share_from_main, sync_ranks

log = logging.getLogger(__name__)


def _start_session(config, device, prepared, precision):
    from .tracking.context import context_tags
    from .tracking.dataset_input import log_dataset_inputs
    from .tracking.run_session import RunSession

    resume_id = last_run(config.output_dir) if config.resume and not os.environ.get("MLFLOW_RUN_ID") else None
    if config.resume and not (resume_id or os.environ.get("MLFLOW_RUN_ID")):
        raise ConfigError("resume", "true", f"allowed only after a run in output_dir {config.output_dir!r} "
                          "(no last_run.json there)")
    tags = {**context_tags(device),
            **train_record.start_tags(config, device, prepared.data_loader, precision, prepared.data)}
    if prepared.fallback_reason:
        tags["data_loader.fallback_reason"] = prepared.fallback_reason
    if config.resume:
        tags["resumed"] = "true"
    session = RunSession.start(config.experiment_name, train_record.run_name(config, device.kind), tags, resume_id)
    remember_run(config.output_dir, session.run_id)
    log_dataset_inputs(config, prepared.data)
    return session


def fit_and_record(config, adapter, device, prepared, ranks) -> TrainResult:
    precision = adapter.precision_used(prepared.args)
    session = _start_session(config, device, prepared, precision) if ranks.is_main else None
    try:
        return _fit(config, adapter, device, prepared, ranks, session, precision)
    except BaseException as exc:
        if session is not None:
            status = "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED"
            if isinstance(exc, ConfigError) and session.previous_status:
                status = session.previous_status  # a refused resume leaves the run as it was
            else:
                session.set_tags({"error": str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__})
            session.finish(status, min(FLUSH_TIMEOUT, 30))
        raise


def _fit(config, adapter, device, prepared, ranks, session, precision) -> TrainResult:
    from .modeling import count_parameters

    run_id = share_from_main(session.run_id if session else os.environ.get("MLFLOW_RUN_ID"), ranks)
    prepared.args.output_dir = str(Path(config.output_dir) / (run_id or "run"))
    trainer, throughput = _build_trainer(config, adapter, prepared, session)
    if session:
        extra = adapter.extra_params(prepared.args, config)
        session.log_params(train_record.train_params(config, prepared.args, prepared.loaded.model.config,
                                                     prepared.data, count_parameters(prepared.loaded.model), extra))
    sampler = _start_sampler(adapter, device, session)
    try:
        output = trainer.train(resume_from_checkpoint=_checkpoint(config, prepared.args.output_dir))
    finally:
        if sampler:
            sampler.stop()
    samples_per_rank_step = prepared.args.per_device_train_batch_size * prepared.args.gradient_accumulation_steps
    per_rank = gather_to_main(throughput.result(samples_per_rank_step), ranks)
    metrics = {**combine_ranks(per_rank), "train_runtime": output.metrics.get("train_runtime"),
               "train_loss": output.training_loss,
               "trainer_reported_samples_per_second": output.metrics.get("train_samples_per_second")}
    metrics.update(_evaluate(config, trainer, prepared, ranks))
    peak = adapter.peak_memory_gb()
    if peak is not None:
        metrics["device_peak_memory_gb"] = peak
    if not session:
        sync_ranks(ranks)
        return TrainResult(run_id, metrics)
    return _record(config, device, prepared, session, trainer, metrics, precision, ranks)


def _build_trainer(config, adapter, prepared, session):
    from .evaluation import keep_embeddings, retrieval_metrics_fn
    from .telemetry.throughput import ThroughputCallback
    from .trainer import build_trainer_class
    from .tracking.null_sink import NullSink
    from .data.collate import collate_batch

    cls = build_trainer_class(adapter.trainer_class())
    cls.device_loader = prepared.device_loader
    cls.image_mean, cls.image_std = prepared.loaded.image_mean, prepared.loaded.image_std
    args = prepared.args
    world = max(1, args.world_size)
    sink = session.buffer if session else NullSink()
    holder = {}
    throughput = ThroughputCallback(sink, lambda: getattr(holder.get("trainer"), "timed_loader", None),
                                    args.per_device_train_batch_size * world * args.gradient_accumulation_steps,
                                    config.throughput_warmup_steps, args.logging_steps)
    captions = [r[prepared.data.caption_column] for r in prepared.data.validation_rows]
    trainer = cls(model=prepared.loaded.model, args=args, train_dataset=prepared.data.train,
                  eval_dataset=prepared.data.validation, data_collator=collate_batch, callbacks=[throughput],
                  compute_metrics=retrieval_metrics_fn(captions), preprocess_logits_for_metrics=keep_embeddings,
                  **adapter.trainer_kwargs(config))
    holder["trainer"] = trainer
    return trainer, throughput


def _start_sampler(adapter, device, session):
    if not session:
        return None
    from .telemetry.host_cpu import HostCpuSampler

    try:
        sampler = HostCpuSampler(session.buffer, 2.0, adapter.device_samplers(device.count))
        sampler.step = session.next_system_step(sampler.sample_keys())
        return sampler.start()
    except Exception as exc:  # noqa: BLE001 - telemetry fails soft
        log.warning("host CPU sampling disabled: %s", exc)
        return None


def _checkpoint(config, output_dir: str):
    if not config.resume:
        return None
    if not any(Path(output_dir).glob("checkpoint-*")):
        raise ConfigError("resume", "true", f"allowed only with a checkpoint in {output_dir} (train with save_steps>0)")
    return True


def _evaluate(config, trainer, prepared, ranks) -> dict:
    from .evaluation import caption_match_accuracy

    metrics = {k: v for k, v in trainer.evaluate().items()
               if k in ("eval_loss", "eval_recall_at_1", "eval_recall_at_5", "eval_runtime", "eval_samples_per_second")}
    if ranks.is_main:
        model = trainer.model
        model.eval()
        accuracy = caption_match_accuracy(
            model, prepared.loaded.tokenizer, prepared.data.validation, prepared.data.validation_rows,
            prepared.data.image_column, prepared.loaded.image_size, prepared.loaded.image_mean,
            prepared.loaded.image_std, config.max_seq_length, trainer.args.device)
        if accuracy is not None:
            metrics["eval_caption_match_accuracy"] = accuracy
    return metrics


def _record(config, device, prepared, session, trainer, metrics, precision, ranks) -> TrainResult:
    from .tracking.model_publish import publish_model

    step = trainer.state.global_step
    bound = input_bound_label(metrics["dataloader_wait_fraction"])
    session.buffer.log_metrics({k: float(v) for k, v in metrics.items() if v is not None}, step)
    session.set_tags({"input_bound": bound})
    if "train_samples_per_second" not in metrics:
        session.set_tags({"throughput.note": f"no steady-state throughput: the run (resumed) had no step left after "
                                             f"the {config.throughput_warmup_steps} warmup steps"})
    session.set_description(train_record.describe(config, device, prepared.data_loader, precision, metrics, bound))
    version = publish_model(config, device, prepared, session, trainer, metrics, step) if config.log_model else None
    sync_ranks(ranks)
    left = session.finish("FINISHED", FLUSH_TIMEOUT)
    return TrainResult(session.run_id, metrics, version, left)
