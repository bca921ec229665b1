"""The Trainer subclass every accelerator uses: timed loaders, device-side normalization."""

from __future__ import annotations

from .data.image_transform import normalize_batch
from .telemetry.loader_wait import TimedLoader


def build_trainer_class(base: type) -> type:
    """Subclass the adapter's Trainer (Trainer or GaudiTrainer) with the project's data hooks."""

    class BridgeTowerTrainer(base):
        device_loader = None  # accelerators.base.DeviceLoader when decoding on the device
        image_mean = image_std = None
        timed_loader: TimedLoader | None = None

        def get_train_dataloader(self):
            if self.device_loader is not None:
                self.timed_loader = TimedLoader(self.device_loader.loader, self.device_loader.length)
            else:
                self.timed_loader = TimedLoader(super().get_train_dataloader())
            return self.timed_loader

        def get_eval_dataloader(self, eval_dataset=None):
            return TimedLoader(super().get_eval_dataloader(eval_dataset))

        def _prepare_inputs(self, inputs):
            inputs = super()._prepare_inputs(inputs)
            pixels = inputs.get("pixel_values")
            if pixels is not None and not pixels.is_floating_point():
                # uint8 from the CPU loader: one fused normalize per batch, on the device
                inputs["pixel_values"] = normalize_batch(pixels, self.image_mean, self.image_std)
            return inputs

    return BridgeTowerTrainer
