"""Every published reference (`reference=all`): the study's numbers plus older and other sources.

`study` is the comparison the study reproduces (the blog's 2023-08 table and optimum-habana's current
Gaudi2 CI baseline). `all` adds what is context rather than the claim: optimum-habana's CI history and
its Gaudi3 baseline, Intel's performance table, and the blog's first version.
"""

from __future__ import annotations

from ...contract import DECODE_CPU, DECODE_DEVICE
from ..analysis.runs import RunRecord
from .study import (
    H200_NOTE,
    STUDY_CAVEATS,
    UNREPORTED,
    PublishedNumber,
    published_record,
    study_numbers,
    study_records,
)

REFERENCES = ("none", "study", "all")
CI_HISTORY = (  # (source date and change, strategy, samples/s) from tests/baselines in optimum-habana
    ("2023-11, #508", "ddp", 921.069),
    ("2024-02, Transformers 4.37", "ddp", 930.245),
    ("2024-03, SynapseAI 1.15, fast_ddp since #799", "fast_ddp", 918.387),
)
CI_GAUDI3_SOURCE = "published: optimum-habana CI baseline, Gaudi3"
INTEL_SOURCE = "published: Intel Gaudi performance table (Optimum Habana 1.12.1)"
BLOG_V1_SOURCE = "published: HF blog bridgetower, first version (Optimum Habana 1.6)"
BLOG_V1 = (  # (accelerator, batch, workers, decode, strategy, samples/s), each device at its largest batch
    ("gaudi2", "40", 0, DECODE_CPU, "ddp", 532.4), ("gaudi2", "40", 1, DECODE_CPU, "ddp", 639.7),
    ("gaudi2", "40", 1, DECODE_CPU, "fast_ddp", 705.9), ("gaudi2", "40", 1, DECODE_DEVICE, "fast_ddp", 802.1),
    ("a100", "32", 0, DECODE_CPU, "ddp", 210.5), ("a100", "32", 1, DECODE_CPU, "ddp", 296.6),
)
# The Gaudi2 model card of those runs (regisss/bridgetower-newyorker-gaudi2-8x): max memory at batch 40.
BLOG_V1_MEMORY_GB = {"gaudi2": 83.39}
# Sources that say each device ran at its own largest batch: their rows are paired across batch sizes.
OWN_LARGEST_BATCH_SOURCES = frozenset({BLOG_V1_SOURCE})
CI_CAVEAT = ("optimum-habana's CI baseline: 8x Gaudi2, batch 48, 5 epochs, --throughput_warmup_steps 3, "
             "media pipeline, 2 workers; one number per release, no variance.")
ALL_CAVEATS = {
    **STUDY_CAVEATS,
    **{f"published: optimum-habana CI baseline ({when})": (CI_CAVEAT,) for when, _, _ in CI_HISTORY},
    CI_GAUDI3_SOURCE: ("optimum-habana's Gaudi3 baseline (783.48 samples/s, 496.32 s) from the same test as "
                       "Gaudi2's (8 devices, batch 48, media pipeline, 2 workers); one number, no variance.",),
    INTEL_SOURCE: ("Intel's table: 8 Gaudi cards (listed as gaudi2, the generation that table covered), batch 40, "
                   "Optimum Habana 1.12.1; worker count, decode and warmup not stated; no variance.",),
    BLOG_V1_SOURCE: ("The blog's first version compared each device at its own largest batch: Gaudi2 at 40 "
                     "(Adam eps 1e-6), A100 at 32 (eps 1e-8); its pairs are shown across batch sizes (published "
                     "pairs), its ratios x2.53 at 0 workers, x2.16 at 1 worker, x2.38 with fast_ddp and x2.70 "
                     "(\"almost 3x\") with fast_ddp + media pipeline, the last two against the A100's 1 worker.",
                     "Gaudi excluded 3 warmup steps, the A100 runs none; no repeat count or variance.",
                     "Gaudi2 memory: 83.39 GB (of 93.74) is the max memory its model card gives at batch 40, one "
                     "figure for the run, shown on each Gaudi2 row; the A100 card gives none."),
}


def extra_numbers() -> list[PublishedNumber]:
    """What `all` adds to `study`."""
    numbers = [PublishedNumber(f"published: optimum-habana CI baseline ({when})", "gaudi2", value, 2, DECODE_DEVICE,
                               strategy=strategy, warmup="3")
               for when, strategy, value in CI_HISTORY]
    numbers.append(PublishedNumber(CI_GAUDI3_SOURCE, "gaudi3", 783.481, 2, DECODE_DEVICE, strategy="ddp", warmup="3"))
    numbers.append(PublishedNumber(INTEL_SOURCE, "gaudi2", 1031.0, -1, UNREPORTED, batch="40", warmup=UNREPORTED))
    numbers += [PublishedNumber(BLOG_V1_SOURCE, accel, value, workers, decode, batch=batch, strategy=strategy,
                                memory_gb=BLOG_V1_MEMORY_GB.get(accel))
                for accel, batch, workers, decode, strategy, value in BLOG_V1]
    return numbers


def reference_records(reference: str) -> list[RunRecord]:
    """Published records for `none`, `study` or `all` (validated by the caller)."""
    if reference == "study":
        return study_records()
    if reference == "all":
        numbers = study_numbers() + extra_numbers()
        return [published_record(number, index) for index, number in enumerate(numbers)]
    return []


def reference_notes(reference: str) -> list[str]:
    return [H200_NOTE] if reference in ("study", "all") else []
