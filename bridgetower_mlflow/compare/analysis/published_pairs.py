"""Pure published pairs: a source's Gaudi rows against its GPU rows across batch sizes.

Only for sources that say each device ran at its own largest batch (the blog's first version:
Gaudi2 40, A100 32); that is the comparison they published. Measured runs are never paired across
batch sizes: their batch is a choice made here, not a device's limit.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ...contract import CUDA_FAMILY, GAUDI_FAMILY, accelerator_family
from .grouping import CONFIG_KEYS, DECODE_ORDER, GroupStats
from .headline import CellPair
from .speedups import ConfigSection

BATCH_KEY, STRATEGY_KEY = "per_device_train_batch_size", "distribution_strategy"
PAIR_RULE = ("matched = the same workers, decode and strategy on both; a Gaudi setting the GPU did not run "
             "(fast_ddp, device decode) is set against the GPU's fastest published setting, as the source did")


def setting_text(group: GroupStats) -> str:
    """`w1 decode=cpu fast_ddp`: the data-loading setting and the strategy, which varies inside a pair."""
    return f"{group.setting.label} {group.config.get(STRATEGY_KEY, '')}".rstrip()


@dataclass(frozen=True)
class PublishedPairRow:
    """One published Gaudi row against the GPU row it is compared with."""

    cells: CellPair
    matched: bool  # False: the GPU did not run this setting; `cells.gpu` is its fastest row


@dataclass(frozen=True)
class PublishedPair:
    """A source's Gaudi accelerator at its batch against its GPU at the GPU's batch."""

    source: str
    gaudi: str
    gpu: str
    gaudi_batch: str
    gpu_batch: str
    rows: tuple[PublishedPairRow, ...]

    @property
    def caption(self) -> str:
        return (f"published pair, each device at its own largest batch: "
                f"{self.gaudi} b{self.gaudi_batch} vs {self.gpu} b{self.gpu_batch}")


def _same_but_batch_and_strategy(first: GroupStats, second: GroupStats) -> bool:
    return first.warmup == second.warmup and all(
        first.config[key] == second.config[key] for key in CONFIG_KEYS if key not in (BATCH_KEY, STRATEGY_KEY))


def _row_order(group: GroupStats) -> tuple[int, str, int]:
    return (group.setting.workers, group.config.get(STRATEGY_KEY, ""), DECODE_ORDER.get(group.setting.decode, 9))


def _pair_rows(gaudis: list[GroupStats], gpus: list[GroupStats]) -> tuple[PublishedPairRow, ...]:
    fastest = max(gpus, key=lambda g: g.median)
    rows = []
    for gaudi in sorted(gaudis, key=_row_order):
        same = next((g for g in gpus if g.setting == gaudi.setting
                     and g.config.get(STRATEGY_KEY) == gaudi.config.get(STRATEGY_KEY)), None)
        rows.append(PublishedPairRow(CellPair(gaudi, same or fastest), matched=same is not None))
    return tuple(rows)


def build_published_pairs(sections: Sequence[ConfigSection], sources: Collection[str]) -> list[PublishedPair]:
    """Each (Gaudi, GPU) accelerator pair of each listed source whose rows differ only in batch (and strategy)."""
    cells: dict[tuple[str, str, str], list[GroupStats]] = {}
    for section in sections:
        if section.published and section.source in sources:
            for row in section.rows:
                for group in row.cells.values():
                    key = (group.source, group.accelerator, group.config[BATCH_KEY])
                    cells.setdefault(key, []).append(group)
    pairs = []
    for (source, gaudi, gaudi_batch), gaudis in cells.items():
        if accelerator_family(gaudi) != GAUDI_FAMILY:
            continue
        for (other_source, gpu, gpu_batch), gpus in cells.items():
            if other_source != source or accelerator_family(gpu) != CUDA_FAMILY or gpu_batch == gaudi_batch:
                continue
            comparable = [g for g in gpus if all(_same_but_batch_and_strategy(g, x) for x in gaudis)]
            if comparable:
                pairs.append(PublishedPair(source, gaudi, gpu, gaudi_batch, gpu_batch,
                                           _pair_rows(gaudis, comparable)))
    return pairs
