"""Pure translation of a run's settings into TrainingArguments kwargs for NVIDIA GPUs."""

from __future__ import annotations

import re

from ...errors import ConfigError

GPU_MODEL = re.compile(r"(?<![a-z0-9])(a100|h100|h200)(?![0-9])")


def nvidia_label(device_name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> h100; names outside the study (and GH200) -> cuda."""
    match = GPU_MODEL.search(device_name.lower())
    return match.group(1) if match else "cuda"


def cuda_training_kwargs(kwargs: dict, settings, *, bf16_ok: bool, tf32_ok: bool) -> dict:
    """TrainingArguments kwargs (hf_args merged) for NVIDIA: bf16 (auto/bf16), TF32 matmuls, nccl."""
    precision, strategy = settings.precision, settings.distribution_strategy
    if strategy != "ddp":
        raise ConfigError("distribution_strategy", strategy,
                          "allowed on NVIDIA: ddp (fast_ddp is an optimum-habana strategy)")
    kwargs = dict(kwargs)
    if precision == "bf16" and not bf16_ok:
        raise ConfigError("precision", "bf16", "allowed on this GPU: fp32 or auto (no bf16 support)")
    if precision == "fp32":
        kwargs["bf16"] = False
    elif precision == "bf16" or (bf16_ok and not kwargs.get("fp16")):
        kwargs["bf16"] = True
    if tf32_ok:
        kwargs.setdefault("tf32", True)  # an explicit --tf32 in hf_args wins
    kwargs.pop("use_cpu", None)
    # pinned batches copied without blocking: the step does not wait in the loader for the GPU's backlog
    kwargs.setdefault("dataloader_pin_memory", True)
    kwargs.setdefault("accelerator_config", {"non_blocking": True})
    if settings.world_size > 1:
        kwargs.setdefault("ddp_backend", "nccl")
    return kwargs
