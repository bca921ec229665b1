"""The Trainer every accelerator uses: the recipe's Trainer class plus timed loaders and device-side normalize."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..data.cpu_images import normalize_batch
from ..telemetry.steps.loader_wait import TimedLoader
from ..telemetry.steps.trainer_meter import TrainerMeter
from .loaders import ResumingLoader
from .step_marks import with_step_marks, with_timed_pauses

if TYPE_CHECKING:
    from ..accelerators.base import DeviceLoader, PhaseTiming
    from ..config import TrainConfig
    from ..data.cpu_images import ImageSpec
    from ..telemetry.sinks import MetricSink
    from ..telemetry.steps.profiler_window import ProfilerWindow
    from ..telemetry.steps.step_timing import StepTimingCallback
    from ..telemetry.steps.throughput import ThroughputCallback
    from ..telemetry.system.energy import EnergyWindow
    from .prepare import Prepared
    from .quality import QualityCallback

log = logging.getLogger(__name__)


def build_trainer_class(base: type[Any]) -> type[Any]:
    """Subclass the recipe's Trainer (Trainer or GaudiTrainer) with the project's data hooks and step marks."""

    class BridgeTowerTrainer(base):
        train_loader: ResumingLoader | None = None
        quality: QualityCallback | None = None  # its evaluations on the time-to-quality clock (build_trainer)

        def __init__(self, *args: Any, device_loader: DeviceLoader | None = None, image: ImageSpec | None = None,
                     step_timing: StepTimingCallback | None = None, meter: TrainerMeter | None = None,
                     **kwargs: Any) -> None:
            self.device_loader = device_loader  # when decoding on the device
            self.meter = meter  # its train loader attaches itself here, its evaluations and saves are timed here
            self.image = image  # the model's input: mean and std of the device-side normalize
            self.step_timing = step_timing  # the phase breakdown's marks (the step-marks layer reads it)
            super().__init__(*args, **kwargs)

        def get_train_dataloader(self) -> ResumingLoader:
            if self.device_loader is not None:
                loader, length = self.device_loader.loader, self.device_loader.length
            else:
                loader, length = super().get_train_dataloader(), None
            self.train_loader = ResumingLoader(loader, self, length, self.meter)
            return self.train_loader

        def _run_epoch(self, *args: Any, **kwargs: Any) -> Any:
            """transformers 5.x sizes every epoch before the checkpoint's step is loaded: a resumed epoch is sized
            here from what its loader has left, so its last accumulation update ends on that epoch's last batch."""
            loader = kwargs.get("train_dataloader")
            if isinstance(loader, ResumingLoader) and kwargs.get("epoch") == kwargs.get("epochs_trained"):
                left = len(loader)
                if left != kwargs.get("steps_in_epoch"):
                    accumulation = max(1, int(self.args.gradient_accumulation_steps))
                    kwargs.update(steps_in_epoch=left, num_update_steps_per_epoch=max(-(-left // accumulation), 1))
            return super()._run_epoch(*args, **kwargs)

        def get_eval_dataloader(self, eval_dataset: Any = None) -> TimedLoader:
            # drop_last is the training rule (full contrastive batches); evaluation scores every row, on every
            # accelerator: the base Trainers (Trainer, GaudiTrainer) build both loaders from the one flag
            drop_last, self.args.dataloader_drop_last = self.args.dataloader_drop_last, False
            try:
                return TimedLoader(super().get_eval_dataloader(eval_dataset))
            finally:
                self.args.dataloader_drop_last = drop_last

        def _prepare_inputs(self, inputs: Any) -> Any:
            inputs = super()._prepare_inputs(inputs)
            pixels = inputs.get("pixel_values")
            if pixels is not None and not pixels.is_floating_point():
                # uint8 from the CPU loader: one fused normalize per batch, on the device
                if self.image is None:
                    raise TypeError("uint8 pixel_values need the model's image spec (image=) to be normalized")
                inputs["pixel_values"] = normalize_batch(pixels, self.image.mean, self.image.std)
            return inputs

    return with_step_marks(with_timed_pauses(BridgeTowerTrainer))  # the input hook's marks hold the normalize


def build_trainer(config: TrainConfig, prepared: Prepared, sink: MetricSink,
                  progress_s: float = 10.0, energy: EnergyWindow | None = None) -> tuple[Any, ThroughputCallback]:
    """(trainer, throughput callback) for `prepared`; metrics go to `sink`. The
    trainer's `quality` is its evaluations on the time-to-quality clock."""
    from ..config import quality_of
    from ..data.collate import collate_batch
    from ..telemetry.steps.progress import ProgressPrinter
    from ..telemetry.steps.step_timing import StepTimingCallback
    from ..telemetry.steps.throughput import ThroughputCallback
    from .checkpoints.callbacks import checkpoint_callbacks
    from .evaluate import keep_embeddings, retrieval_metrics_fn
    from .quality import QualityCallback  # imports transformers: not before train exports the stack's mode

    cls = build_trainer_class(prepared.recipe.trainer_class)
    args = prepared.args
    world = max(1, args.world_size)
    meter = TrainerMeter()  # built before the Trainer, which builds the train loader later and attaches it here
    throughput = ThroughputCallback(sink, meter,
                                    args.per_device_train_batch_size * world * args.gradient_accumulation_steps,
                                    config.throughput_warmup_steps, int(args.logging_steps), energy)
    timing = StepTimingCallback(sink, _phase_timing(prepared), throughput.wait_seconds,
                                config.throughput_warmup_steps, int(args.logging_steps), _profile(config, prepared))
    captions = [r[prepared.data.caption_column] for r in prepared.data.validation_rows]
    quality = QualityCallback(sink, meter, quality_of(config), config.stop_at_target,
                              final=bool(config.eval_steps or config.target))
    durable = _persist_on_save(sink)  # after quality's: an evaluation's metrics are queued before a checkpoint
    trainer = cls(model=prepared.loaded.model, args=args, train_dataset=prepared.data.train,
                  device_loader=prepared.device_loader, image=prepared.loaded.image, step_timing=timing,
                  meter=meter,
                  eval_dataset=prepared.data.validation, data_collator=collate_batch,
                  callbacks=[timing, throughput, ProgressPrinter(throughput, progress_s), quality, durable,
                             *checkpoint_callbacks(config, sink),  # after quality's: its state goes in the marker
                             *prepared.recipe.callbacks],
                  compute_metrics=retrieval_metrics_fn(captions), preprocess_logits_for_metrics=keep_embeddings,
                  **prepared.recipe.trainer_kwargs)
    _console_without_trainer_speeds(trainer)
    trainer.quality = quality
    return trainer, throughput


def _phase_timing(prepared: Prepared) -> PhaseTiming | None:
    """How this device times a step's phases; None (no breakdown, a warning) where asking it fails."""
    try:
        return prepared.adapter.phase_timing(prepared.recipe, prepared.args)
    except Exception as exc:  # noqa: BLE001 - telemetry fails soft
        log.warning("phase breakdown off: %s", exc)
        return None


def _profile(config: TrainConfig, prepared: Prepared) -> ProfilerWindow | tuple[int, int] | None:
    """The profiler window on the first rank; the steps it takes, which every rank keeps out of its window."""
    from ..config import profile_window
    from ..telemetry.steps.profiler_window import ProfilerWindow

    window = profile_window(config)
    if window is None or prepared.args.process_index != 0:
        return window
    return ProfilerWindow(*window, prepared.adapter.profiler_activities())


def _console_without_trainer_speeds(trainer: Any) -> None:
    """The Trainer's printer (a PrinterCallback with disable_tqdm, else the tqdm bar) without its samples/s:
    the console's samples/s is the project's (the progress line, the summary), one rule on every accelerator."""
    from transformers import PrinterCallback, ProgressCallback

    from ..telemetry.steps.progress import without_speed_figures

    for printer in (PrinterCallback, ProgressCallback):
        found = trainer.pop_callback(printer)
        if found is not None:
            trainer.add_callback(without_speed_figures(type(found))())


def _persist_on_save(sink: MetricSink) -> Any:
    """A checkpoint is a durable point: what was logged up to it is on disk before training goes on."""
    from transformers import TrainerCallback

    class PersistOnSave(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            # this step's losses, just before its checkpoint
            if control.should_save:
                sink.persist()

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            sink.persist()

    return PersistOnSave()
