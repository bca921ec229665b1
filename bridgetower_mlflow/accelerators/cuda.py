"""NVIDIA GPUs: plain Trainer with bf16 autocast and TF32, nccl, nvJPEG device decode."""

from __future__ import annotations

import logging
import re

from ..errors import AcceleratorUnavailable, ConfigError
from .base import Accelerator, DeviceInfo
from .detection import (allowed_here, check_count, check_label, local_processes, local_rank,
                        module_present, package_version, world_size)

logger = logging.getLogger(__name__)
GPU_MODEL = re.compile(r"(?<![a-z0-9])(a100|h100|h200)(?![0-9])")


def nvidia_label(device_name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> h100; names outside the study (and GH200) -> cuda."""
    match = GPU_MODEL.search(device_name.lower())
    return match.group(1) if match else "cuda"


def cuda_training_kwargs(common: dict, config, *, bf16_ok: bool, tf32_ok: bool, distributed: bool) -> dict:
    """TrainingArguments kwargs for NVIDIA: bf16 (auto/bf16), TF32 matmuls, nccl."""
    if config.distribution_strategy != "ddp":
        raise ConfigError("distribution_strategy", config.distribution_strategy,
                          "allowed on NVIDIA: ddp (fast_ddp is an optimum-habana strategy)")
    kwargs = dict(common)
    if config.precision == "bf16" and not bf16_ok:
        raise ConfigError("precision", "bf16", "allowed on this GPU: fp32 or auto (no bf16 support)")
    if config.precision == "fp32":
        kwargs["bf16"] = False
    elif config.precision == "bf16" or (bf16_ok and not kwargs.get("fp16")):
        kwargs["bf16"] = True
    if tf32_ok:
        kwargs.setdefault("tf32", True)  # an explicit --tf32 in hf_args wins
    kwargs.pop("use_cpu", None)
    if distributed:
        kwargs.setdefault("ddp_backend", "nccl")
    return kwargs


class CudaAccelerator(Accelerator):
    kind = "cuda"
    device_loader_name = "nvjpeg"

    def detect(self, devices: int) -> DeviceInfo:
        import torch

        if not torch.cuda.is_available():
            built = f"CUDA {torch.version.cuda}" if torch.version.cuda else "no CUDA"
            raise AcceleratorUnavailable(
                f"accel: {self.requested} requested but no NVIDIA GPU is visible "
                f"(torch {torch.__version__} built with {built}); allowed here: {allowed_here()}"
            )
        needed = local_processes(devices)
        check_count(self.requested, needed, torch.cuda.device_count(), "NVIDIA GPU(s)")
        names = {torch.cuda.get_device_name(i) for i in range(needed)}
        if len(names) > 1:
            raise AcceleratorUnavailable(f"devices: {needed} GPUs of different models ({', '.join(sorted(names))}); "
                                         "allowed: GPUs of one model (set CUDA_VISIBLE_DEVICES)")
        name = names.pop()
        kind = check_label(self.requested, nvidia_label(name), name, "cuda")
        props = torch.cuda.get_device_properties(0)
        from .nvml_sampler import nvidia_driver_version

        return DeviceInfo(
            kind=kind, device_name=name, count=world_size(devices),
            memory_gb=round(props.total_memory / 2**30, 1), driver=nvidia_driver_version(),
            software=self._software(torch),
            extra_tags={"cuda.compute_capability": f"{props.major}.{props.minor}"},
        )

    @staticmethod
    def _software(torch) -> dict:
        software = {"torch": torch.__version__, "cuda": str(torch.version.cuda),
                    "cudnn": str(torch.backends.cudnn.version())}
        for package in ("torchvision", "nvidia-ml-py"):
            version = package_version(package)
            if version:
                software[package.replace("-", "_")] = version
        return software

    def training_arguments(self, common: dict, config):
        import torch
        from transformers import TrainingArguments

        capability = torch.cuda.get_device_capability() if torch.cuda.is_available() else (0, 0)
        kwargs = cuda_training_kwargs(
            common, config, bf16_ok=torch.cuda.is_available() and torch.cuda.is_bf16_supported(),
            tf32_ok=capability >= (8, 0), distributed=world_size(config.devices) > 1,
        )
        return TrainingArguments(**kwargs)

    def distributed_backend(self) -> str:
        return "nccl"

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize()

    def peak_memory_gb(self) -> float | None:
        import torch

        return round(torch.cuda.max_memory_allocated() / 2**30, 3) if torch.cuda.is_available() else None

    def supports_device_decode(self) -> bool:
        return module_present("torchvision")

    def device_decode_loader(self, dataset, *, batch_size, seed, image_size, mean, std, num_workers,
                             collate, rank, world_size):
        """nvJPEG loader for this rank's GPU; `collate` is unused (workers ship bytes, not pixels)."""
        import torch

        from .nvjpeg_loader import build_nvjpeg_loader

        index = local_rank()
        if torch.cuda.is_available() and index >= torch.cuda.device_count():
            index = torch.cuda.current_device()  # one GPU per process via CUDA_VISIBLE_DEVICES
        device = torch.device("cuda", index)
        return build_nvjpeg_loader(dataset, batch_size=batch_size, seed=seed, image_size=image_size,
                                   mean=mean, std=std, num_workers=num_workers, rank=rank,
                                   world_size=world_size, device=device)

    def enables_mlflow_gpu_metrics(self) -> bool:
        return module_present("pynvml")

    def device_samplers(self, device_count: int) -> list:
        if not module_present("pynvml"):
            return []
        from .nvml_sampler import NvmlSampler

        try:
            return [NvmlSampler(device_count)]
        except Exception as exc:  # noqa: BLE001 - telemetry fails soft
            logger.warning("GPU telemetry off: NVML failed to start (%s: %s)", type(exc).__name__, exc)
            return []
