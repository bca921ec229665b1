"""Per-rank batch plans for the on-device loaders: DistributedSampler semantics, reseeded per epoch."""

from __future__ import annotations

import math


class RankBatchPlan:
    """Shuffled, rank-sharded index batches; `set_epoch` reshuffles like DistributedSampler."""

    def __init__(self, size: int, batch_size: int, *, seed: int, rank: int = 0, world_size: int = 1,
                 pad_last_batch: bool = False):
        self.size, self.batch_size, self.seed = size, batch_size, seed
        self.rank, self.world_size = rank, world_size
        self.pad_last_batch, self.epoch = pad_last_batch, 0
        self.per_rank = math.ceil(size / world_size)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return math.ceil(self.per_rank / self.batch_size)

    def rank_indices(self) -> list[int]:
        import torch

        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(self.size, generator=generator).tolist()
        total = self.per_rank * self.world_size
        order = wrap(order, total)  # every rank gets the same count, as DistributedSampler
        return order[self.rank:total:self.world_size]

    def __iter__(self):
        mine = self.rank_indices()
        if self.pad_last_batch:
            mine = wrap(mine, len(self) * self.batch_size)  # the media pipe needs full batches
        for start in range(0, len(mine), self.batch_size):
            yield mine[start:start + self.batch_size]


def wrap(seq: list, length: int) -> list:
    """`seq` repeated from its start until it is `length` long."""
    return (seq * math.ceil(length / max(len(seq), 1)))[:length]
