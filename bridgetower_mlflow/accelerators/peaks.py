"""Dense peak FLOP/s per device and precision, each with its public source; MFU divides by these.

Vendor datasheets quote tensor-core figures "with sparsity" (2:4 structured): dense is half of that.
A precision missing here has no known dense peak, and a run in it gets no MFU (with the reason).
"""

from __future__ import annotations

from dataclasses import dataclass

NVIDIA_A100 = "NVIDIA A100 Tensor Core GPU datasheet (2021): BF16 312 TFLOPS dense (624 sparse), TF32 156, FP32 19.5"
NVIDIA_H100 = ("NVIDIA H100 Tensor Core GPU datasheet (2023): SXM BF16 1,979 / PCIe 1,513 TFLOPS with sparsity, "
               "TF32 989 / 756 with sparsity, FP32 67 / 51")
NVIDIA_H200 = ("NVIDIA H200 Tensor Core GPU datasheet (2024): SXM BF16 1,979 / NVL 1,671 TFLOPS with sparsity, "
               "TF32 989 / 835 with sparsity, FP32 67 / 60")
INTEL_GAUDI = ("Intel, 'Intel Gaudi 3 AI Accelerator: Architected for Gen AI Training and Inference', Hot Chips 2024 "
               "(R. Kaplan): peak BF16 matrix compute Gaudi2 432 TFLOPS, Gaudi3 1,835 TFLOPS")


@dataclass(frozen=True)
class Peak:
    flops: float  # dense FLOP/s of one device
    source: str


# (kind, variant) -> precision -> peak; variant tells SXM from PCIe/NVL parts of one kind
PEAKS = {
    ("a100", ""): {"bf16": Peak(312e12, NVIDIA_A100), "tf32": Peak(156e12, NVIDIA_A100),
                   "fp32": Peak(19.5e12, NVIDIA_A100)},
    ("h100", ""): {"bf16": Peak(989.5e12, NVIDIA_H100), "tf32": Peak(494.7e12, NVIDIA_H100),
                   "fp32": Peak(67e12, NVIDIA_H100)},
    ("h100", "pcie"): {"bf16": Peak(756.5e12, NVIDIA_H100), "tf32": Peak(378e12, NVIDIA_H100),
                       "fp32": Peak(51e12, NVIDIA_H100)},
    ("h200", ""): {"bf16": Peak(989.5e12, NVIDIA_H200), "tf32": Peak(494.7e12, NVIDIA_H200),
                   "fp32": Peak(67e12, NVIDIA_H200)},
    ("h200", "nvl"): {"bf16": Peak(835.5e12, NVIDIA_H200), "tf32": Peak(417.5e12, NVIDIA_H200),
                      "fp32": Peak(60e12, NVIDIA_H200)},
    ("gaudi2", ""): {"bf16": Peak(432e12, INTEL_GAUDI)},
    ("gaudi3", ""): {"bf16": Peak(1835e12, INTEL_GAUDI)},
}


def variant_of(kind: str, device_name: str) -> str:
    """'' for the SXM/OAM part, 'pcie' or 'nvl' where the device name says so."""
    name = device_name.lower()
    for variant in ("pcie", "nvl"):
        if variant in name and (kind, variant) in PEAKS:
            return variant
    return ""


def dense_peak(kind: str, device_name: str, precision: str) -> tuple[Peak | None, str]:
    """(peak, "") when known, else (None, why not): the `mfu.note` text."""
    table = PEAKS.get((kind, variant_of(kind, device_name)))
    if table is None:
        return None, f"no dense peak known for {kind} ({device_name}); MFU needs one (accelerators/peaks.py)"
    peak = table.get(precision)
    if peak is None:
        return None, f"no dense {precision} peak published for {kind}; known: {', '.join(sorted(table))}"
    return peak, ""
