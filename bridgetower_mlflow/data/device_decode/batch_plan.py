"""Per-rank batch plans for the on-device loaders: DistributedSampler semantics, reseeded per epoch."""

from __future__ import annotations

import math


class RankBatchPlan:
    """Shuffled, rank-sharded index batches; `set_epoch` reshuffles like DistributedSampler.

    `drop_last` drops a short last batch (as the CPU loader with dataloader_drop_last); without it
    the last batch is padded by wrapping when `pad_last_batch` (a pipe that needs full batches).
    """

    def __init__(self, size: int, batch_size: int, *, seed: int, rank: int = 0, world_size: int = 1,
                 drop_last: bool = True):
        self.size, self.batch_size, self.seed = size, batch_size, seed
        self.rank, self.world_size, self.drop_last = rank, world_size, drop_last
        self.pad_last_batch, self.epoch, self._skip = False, 0, 0
        self.per_rank = math.ceil(size / world_size)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def skip_once(self, batches: int) -> None:
        """The next pass starts after `batches` batches (a resumed epoch); later passes are whole."""
        self._skip = int(batches)

    def __len__(self) -> int:
        if self.drop_last:
            return self.per_rank // self.batch_size
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
        if self.pad_last_batch and not self.drop_last:
            mine = wrap(mine, len(self) * self.batch_size)
        skip, self._skip = self._skip, 0
        for batch in range(skip, len(self)):
            yield mine[batch * self.batch_size:(batch + 1) * self.batch_size]


def wrap(seq: list, length: int) -> list:
    """`seq` repeated from its start until it is `length` long."""
    return (seq * math.ceil(length / max(len(seq), 1)))[:length]
