"""Published reference numbers (`reference=study`), as clearly marked RunRecords.

Sources: the Hugging Face blog "bridgetower" (updated 2023-08-29, Optimum Habana 1.7, 8 devices,
per-device batch 48) and optimum-habana's CI baseline for Gaudi2 (2025-02, #1749).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...contract import CPU_STUDY_LOADER, DECODE_CPU, DECODE_DEVICE, MEDIAPIPE_LOADER
from ..analysis.runs import RunRecord

BLOG_SOURCE = "published: HF blog bridgetower (2023-08-29)"
CI_SOURCE = "published: optimum-habana CI baseline (2025-02)"
STUDY_MODEL = "BridgeTower/bridgetower-large-itm-mlm-itc"
STUDY_DATASET = "jmhessel/newyorker_caption_contest"
UNREPORTED = "unreported"
MIXED_WARMUP = "3 on Gaudi, none on GPU"  # the blog mixed warmup rules across vendors
DEVICE_NAMES = {"a100": "A100 80GB", "h100": "H100", "gaudi2": "Gaudi2", "gaudi3": "Gaudi3"}
# the study's CPU images went through run_bridgetower.py's own transform (this project's image_backend=study);
# the records keep image_backend's default so that the study's best-vs-best pairs device and CPU decode
LOADERS = {DECODE_CPU: CPU_STUDY_LOADER, DECODE_DEVICE: MEDIAPIPE_LOADER}  # published device decode is Gaudi's only

# accelerator -> ((workers, decode, data_loader, samples/s), ...)
BLOG_NUMBERS = {
    "gaudi2": ((0, DECODE_CPU, CPU_STUDY_LOADER, 601.5), (1, DECODE_CPU, CPU_STUDY_LOADER, 747.4),
               (2, DECODE_CPU, CPU_STUDY_LOADER, 768.7), (2, DECODE_DEVICE, MEDIAPIPE_LOADER, 847.7)),
    "h100": ((0, DECODE_CPU, CPU_STUDY_LOADER, 336.5), (1, DECODE_CPU, CPU_STUDY_LOADER, 580.1),
             (2, DECODE_CPU, CPU_STUDY_LOADER, 602.1)),
    "a100": ((0, DECODE_CPU, CPU_STUDY_LOADER, 227.5), (1, DECODE_CPU, CPU_STUDY_LOADER, 339.7),
             (2, DECODE_CPU, CPU_STUDY_LOADER, 345.4)),
}
CI_GAUDI2_SAMPLES_PER_SECOND = 904.93

# Why the published comparison is not like-for-like (shown under each published section).
BLOG_CAVEATS = (
    "Published numbers, not measured here: 8 devices, per-device batch 48 as the blog's text says "
    "(its command still says 40); no repeat count or variance was reported.",
    "Warmup differs: Gaudi excluded 3 warmup steps (optimum-habana); the GPU runs used stock Trainer, "
    "which has no such option.",
    "Optimizer differs: Adam eps 1e-6 on Gaudi (fused Adam) vs 1e-8 on GPU.",
    "Decoding differs: Gaudi's best figure decodes JPEGs on the device (media pipeline); the GPU runs "
    "decoded on the CPU (no nvJPEG/DALI).",
)
STUDY_CAVEATS = {
    BLOG_SOURCE: BLOG_CAVEATS,
    CI_SOURCE: ("optimum-habana's CI baseline: 8x Gaudi2, 5 epochs, --throughput_warmup_steps 3, "
                "media pipeline, 2 workers; one number per release, no variance.",),
}
H200_NOTE = ("H200: no published BridgeTower fine-tuning number is known (none in the HF blog, optimum-habana's "
             "CI baselines or Intel's table); H200 appears only where measured here.")


@dataclass(frozen=True)
class PublishedNumber:
    """One published samples/s figure and the conditions its source states."""

    source: str
    accelerator: str
    value: float
    workers: int = 0
    decode: str = DECODE_CPU
    batch: str = "48"
    strategy: str = UNREPORTED
    warmup: str = MIXED_WARMUP
    devices: str = "8"
    memory_gb: float | None = None  # device peak memory, only where the source gives one


def published_record(number: PublishedNumber, index: int) -> RunRecord:
    """A RunRecord marked by its source; conditions the source left out read `unreported`."""
    workers = "w?" if number.workers < 0 else f"w{number.workers}"
    return RunRecord(
        run_id=f"published-{number.accelerator}-{index}",
        run_name=f"{number.accelerator} {workers} decode={number.decode} (published)",
        experiment_id="",
        accelerator=number.accelerator,
        device_name=DEVICE_NAMES.get(number.accelerator, number.accelerator),
        model=STUDY_MODEL,
        dataset=STUDY_DATASET,
        dataset_config="matching",
        per_device_train_batch_size=number.batch,
        devices=number.devices,
        precision=UNREPORTED,
        max_seq_length=UNREPORTED,
        distribution_strategy=number.strategy,
        throughput_warmup_steps=number.warmup,
        dataloader_num_workers=number.workers,
        decode=number.decode,
        data_loader=LOADERS.get(number.decode, UNREPORTED),
        samples_per_second=number.value,
        samples_per_second_per_device=number.value / int(number.devices),
        source=number.source,
        device_peak_memory_gb=number.memory_gb,
    )


def study_numbers() -> list[PublishedNumber]:
    """The blog's 10 numbers and optimum-habana's current CI baseline."""
    numbers = [PublishedNumber(BLOG_SOURCE, accelerator, value, workers, decode)
               for accelerator, rows in BLOG_NUMBERS.items() for workers, decode, _, value in rows]
    numbers.append(PublishedNumber(CI_SOURCE, "gaudi2", CI_GAUDI2_SAMPLES_PER_SECOND, 2, DECODE_DEVICE,
                                   strategy="ddp", warmup="3"))
    return numbers


def study_records() -> list[RunRecord]:
    """`reference=study`: one record per published number."""
    return [published_record(number, index) for index, number in enumerate(study_numbers())]
