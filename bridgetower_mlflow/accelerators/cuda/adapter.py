"""NVIDIA GPUs: plain Trainer with bf16 autocast and TF32, nccl, nvJPEG device decode."""

from __future__ import annotations

import logging

from ...contract import NVJPEG_LOADER, SM_COUNT_TAG
from ...errors import AcceleratorUnavailable
from ..base import Accelerator, DecodeRequest, DeviceInfo, EventClock, PhaseTiming, RecipeSettings, TrainingRecipe
from ..hf_args import merged_kwargs
from ..installed import module_present, package_version
from ..request_checks import allowed_here, check_count, check_label
from .arguments import cuda_training_kwargs, nvidia_label

logger = logging.getLogger(__name__)


class CudaAccelerator(Accelerator):
    device_decode_loader_name = NVJPEG_LOADER

    def detect(self, devices_here: int, world_size: int, launcher: bool = False) -> DeviceInfo:
        import torch

        if not torch.cuda.is_available():
            built = f"CUDA {torch.version.cuda}" if torch.version.cuda else "no CUDA"
            raise AcceleratorUnavailable(
                f"accel: {self.requested} requested but no NVIDIA GPU is visible "
                f"(torch {torch.__version__} built with {built}); allowed here: {allowed_here()}"
            )
        check_count(self.requested, devices_here, torch.cuda.device_count(), "NVIDIA GPU(s)")
        names = {torch.cuda.get_device_name(i) for i in range(devices_here)}
        if len(names) > 1:
            raise AcceleratorUnavailable(f"devices: {devices_here} GPUs of different models "
                                         f"({', '.join(sorted(names))}); allowed: GPUs of one model "
                                         "(set CUDA_VISIBLE_DEVICES)")
        name = names.pop()
        kind = check_label(self.requested, nvidia_label(name), name, "cuda")
        props = torch.cuda.get_device_properties(0)
        from .driver import nvidia_driver_version

        tags = {"cuda.compute_capability": f"{props.major}.{props.minor}"}
        if getattr(props, "multi_processor_count", None):  # a MIG slice's own: its share of the dense peak
            tags[SM_COUNT_TAG] = str(props.multi_processor_count)
        return DeviceInfo(
            kind=kind, device_name=name, count=world_size,
            memory_gb=round(props.total_memory / 2**30, 1), driver=nvidia_driver_version(),
            software=_software(torch), extra_tags=tags,
        )

    def recipe(self, device: DeviceInfo, settings: RecipeSettings) -> TrainingRecipe:
        import torch
        from transformers import Trainer, TrainingArguments

        available = torch.cuda.is_available()
        capability = torch.cuda.get_device_capability() if available else (0, 0)
        kwargs = cuda_training_kwargs(merged_kwargs(TrainingArguments, settings), settings,
                                      bf16_ok=available and torch.cuda.is_bf16_supported(),
                                      tf32_ok=capability >= (8, 0))
        return TrainingRecipe(TrainingArguments, kwargs, Trainer, precision="bf16" if kwargs.get("bf16") else "fp32",
                              ddp_backend=kwargs.get("ddp_backend"))

    def peak_memory_gb(self) -> float | None:
        import torch

        return round(torch.cuda.max_memory_allocated() / 2**30, 3) if torch.cuda.is_available() else None

    def device_decode_loader(self, request: DecodeRequest):
        """nvJPEG loader for this rank's GPU (workers ship encoded bytes, not pixels)."""
        import torch

        from .nvjpeg import build_nvjpeg_loader

        index = request.local_rank
        if torch.cuda.is_available() and index >= torch.cuda.device_count():
            index = torch.cuda.current_device()  # one GPU per process via CUDA_VISIBLE_DEVICES
        return build_nvjpeg_loader(request, torch.device("cuda", index))

    def mlflow_gpu_count(self, device: DeviceInfo) -> int:
        return device.count

    def device_samplers(self, device: DeviceInfo) -> list:
        if not module_present("pynvml"):
            return []
        from ...samplers.nvml import NvmlSampler

        try:
            return [NvmlSampler(device.count)]
        except Exception as exc:  # noqa: BLE001 - telemetry fails soft
            logger.warning("GPU telemetry off: NVML failed to start (%s: %s)", type(exc).__name__, exc)
            return []

    def phase_timing(self, recipe: TrainingRecipe, args) -> PhaseTiming:
        """CUDA events on the current stream, read back once the GPU has passed them (Event.query: no sync)."""
        import functools

        import torch

        source = "device events (torch.cuda.Event)"
        new_event = functools.partial(torch.cuda.Event, enable_timing=True)
        return PhaseTiming(clock=functools.partial(EventClock, new_event, torch.cuda.synchronize, source),
                           source=source, notes=("host_to_device is the Trainer's _prepare_inputs on the GPU (the "
                                                 "uint8 normalize); accelerate's loader copies each batch inside "
                                                 "next(), so that copy counts in data_wait",))

    def profiler_activities(self) -> list:
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU, ProfilerActivity.CUDA]


def _software(torch) -> dict:
    software = {"torch": torch.__version__, "cuda": str(torch.version.cuda),
                "cudnn": str(torch.backends.cudnn.version())}
    for package in ("torchvision", "nvidia-ml-py"):
        version = package_version(package)
        if version:
            software[package.replace("-", "_")] = version
    return software
