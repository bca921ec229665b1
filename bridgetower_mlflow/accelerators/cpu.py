"""CPU: plain transformers Trainer, gloo for multi-process runs."""

from __future__ import annotations

import os

from .base import Accelerator, DeviceInfo, host_facts


class CpuAccelerator(Accelerator):
    kind = "cpu"

    def detect(self, devices: int) -> DeviceInfo:
        import psutil
        import torch

        return DeviceInfo(
            kind="cpu",
            device_name=host_facts()["host.cpu_model"],
            count=devices,
            memory_gb=round(psutil.virtual_memory().total / 2**30, 1),
            driver=None,
            software={"torch": torch.__version__, "torch_threads": str(torch.get_num_threads())},
        )

    def training_arguments(self, common: dict, config):
        from transformers import TrainingArguments

        from ..errors import ConfigError

        if config.distribution_strategy != "ddp":
            raise ConfigError("distribution_strategy", config.distribution_strategy,
                              "allowed on cpu: ddp (fast_ddp is optimum-habana's Gaudi strategy)")
        kwargs = dict(common)
        kwargs["use_cpu"] = True
        if config.precision == "bf16":
            kwargs["bf16"] = True
        if config.devices > 1 or int(os.environ.get("WORLD_SIZE", "1")) > 1:
            kwargs["ddp_backend"] = "gloo"
        return TrainingArguments(**kwargs)
