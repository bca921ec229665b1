"""Dense peak FLOP/s per device and precision, each with its public source; MFU divides by these.

Vendor datasheets quote tensor-core figures "with sparsity" (2:4 structured): dense is half of that.
A precision missing here has no known dense peak, and a run in it gets no MFU (with the reason). So does a
device whose name shows a variant this table does not know (never a neighbour's peak), and a MIG slice whose
share of the GPU's SMs is not known; a MIG slice whose SM count is known gets that share of the GPU's peak
(the slice runs at the GPU's clocks on fewer SMs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from ..contract import SM_COUNT_TAG

NVIDIA_A100 = ("NVIDIA A100 Tensor Core GPU datasheet (2021): BF16 312 TFLOPS dense (624 sparse), TF32 156, FP32 19.5 "
               "(SXM and PCIe alike); 108 SMs (NVIDIA A100 Tensor Core GPU Architecture whitepaper)")
NVIDIA_H100 = ("NVIDIA H100 Tensor Core GPU datasheet (2023): SXM BF16 1,979 / PCIe 1,513 / NVL 1,671 TFLOPS with "
               "sparsity, TF32 989 / 756 / 835 with sparsity, FP32 67 / 51 / 60; SXM and NVL 132 SMs, PCIe 114")
NVIDIA_H200 = ("NVIDIA H200 Tensor Core GPU datasheet (2024): SXM BF16 1,979 / NVL 1,671 TFLOPS with sparsity, "
               "TF32 989 / 835 with sparsity, FP32 67 / 60; 132 SMs")
INTEL_GAUDI = ("Intel, 'Intel Gaudi 3 AI Accelerator: Architected for Gen AI Training and Inference', Hot Chips 2024 "
               "(R. Kaplan): peak BF16 matrix compute Gaudi2 432 TFLOPS, Gaudi3 1,835 TFLOPS")


@dataclass(frozen=True)
class Peak:
    flops: float  # dense FLOP/s of one device
    source: str


# (kind, variant) -> precision -> peak; variant tells SXM ("") from PCIe/NVL parts of one kind
PEAKS = {
    ("a100", ""): {"bf16": Peak(312e12, NVIDIA_A100), "tf32": Peak(156e12, NVIDIA_A100),
                   "fp32": Peak(19.5e12, NVIDIA_A100)},
    ("a100", "pcie"): {"bf16": Peak(312e12, NVIDIA_A100), "tf32": Peak(156e12, NVIDIA_A100),
                       "fp32": Peak(19.5e12, NVIDIA_A100)},
    ("h100", ""): {"bf16": Peak(989.5e12, NVIDIA_H100), "tf32": Peak(494.7e12, NVIDIA_H100),
                   "fp32": Peak(67e12, NVIDIA_H100)},
    ("h100", "pcie"): {"bf16": Peak(756.5e12, NVIDIA_H100), "tf32": Peak(378e12, NVIDIA_H100),
                       "fp32": Peak(51e12, NVIDIA_H100)},
    ("h100", "nvl"): {"bf16": Peak(835.5e12, NVIDIA_H100), "tf32": Peak(417.5e12, NVIDIA_H100),
                      "fp32": Peak(60e12, NVIDIA_H100)},
    ("h200", ""): {"bf16": Peak(989.5e12, NVIDIA_H200), "tf32": Peak(494.7e12, NVIDIA_H200),
                   "fp32": Peak(67e12, NVIDIA_H200)},
    ("h200", "nvl"): {"bf16": Peak(835.5e12, NVIDIA_H200), "tf32": Peak(417.5e12, NVIDIA_H200),
                      "fp32": Peak(60e12, NVIDIA_H200)},
    ("gaudi2", ""): {"bf16": Peak(432e12, INTEL_GAUDI)},
    ("gaudi3", ""): {"bf16": Peak(1835e12, INTEL_GAUDI)},
}
SMS = {("a100", ""): 108, ("a100", "pcie"): 108, ("h100", ""): 132, ("h100", "pcie"): 114, ("h100", "nvl"): 132,
       ("h200", ""): 132, ("h200", "nvl"): 132}  # streaming multiprocessors of the whole GPU
NAMED_BY_VARIANT = {"a100", "h100", "h200"}  # kinds whose device names tell their variant (NVIDIA's)
# words of an NVIDIA device name that do not tell a variant: the maker, memory size and kind, the SXM form
PLAIN_WORDS = re.compile(r"nvidia|tesla|\d+gb|hbm\d*e?|sxm\d*|tensor|core|gpu")
MIG = re.compile(r"\s+MIG\s+(\S+)\s*$", re.IGNORECASE)  # "NVIDIA H100 80GB HBM3 MIG 1g.10gb"


def variant_of(kind: str, device_name: str) -> str | None:
    """'' for the SXM/OAM part, 'pcie' or 'nvl' where the device name says so; None for a name with words this
    table does not know (another variant, whose peak it does not have)."""
    if kind not in NAMED_BY_VARIANT:
        return ""
    words = [word.removeprefix(kind) for word in re.split(r"[^a-z0-9]+", device_name.lower())]
    extra = {word for word in words if word and not PLAIN_WORDS.fullmatch(word)}
    if not extra:
        return ""
    variant = extra.pop()
    return variant if not extra and (kind, variant) in PEAKS else None


def dense_peak(kind: str, device_name: str, precision: str, sm_count: int | None = None) -> tuple[Peak | None, str]:
    """(peak, "") when known, else (None, why not): the `mfu.note` text. `sm_count`: the device's SMs as CUDA
    reports them (a MIG slice's own), which scale a slice's peak."""
    mig = MIG.search(device_name)
    whole_gpu = device_name[:mig.start()] if mig else device_name
    variant = variant_of(kind, whole_gpu)
    if variant is None:
        return None, (f"no dense peak known for this {kind} variant ({device_name}); MFU needs the device's own, "
                      "never a neighbour's (accelerators/peaks.py)")
    table = PEAKS.get((kind, variant))
    if table is None:
        return None, f"no dense peak known for {kind} ({device_name}); MFU needs one (accelerators/peaks.py)"
    peak = table.get(precision)
    if peak is None:
        return None, f"no dense {precision} peak published for {kind}; known: {', '.join(sorted(table))}"
    if mig:
        return _slice_peak(peak, SMS.get((kind, variant)), sm_count, mig.group(1))
    return peak, ""


def _slice_peak(peak: Peak, gpu_sms: int | None, slice_sms: int | None, profile: str) -> tuple[Peak | None, str]:
    if not gpu_sms or not slice_sms:
        return None, (f"a MIG slice ({profile}) whose share of the GPU's SMs is unknown here; no MFU against the "
                      "whole GPU's peak")
    return replace(peak, flops=peak.flops * slice_sms / gpu_sms,
                   source=f"{peak.source}; MIG {profile}: {slice_sms} of {gpu_sms} SMs"), ""


def device_peak(device: Any, precision: str) -> tuple[Peak | None, str]:
    """dense_peak of a detected device: a MIG slice's peak scales by the SM count detection tagged."""
    sm_count = int(getattr(device, "extra_tags", {}).get(SM_COUNT_TAG) or 0) or None
    return dense_peak(device.kind, device.device_name, precision, sm_count)
