"""What ranks tell each other: everything goes through torch.distributed's object collectives."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from .ranks import RankInfo

T = TypeVar("T")


def _initialized(ranks: RankInfo) -> bool:
    if ranks.world_size == 1:
        return False
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def all_gather_objects(obj: T, ranks: RankInfo) -> list[T]:
    """Every rank's `obj` on every rank (list in rank order); one element without distribution."""
    if not _initialized(ranks):
        return [obj]
    import torch.distributed as dist

    gathered: list[T] = [obj] * dist.get_world_size()  # placeholders: all_gather_object fills every slot
    dist.all_gather_object(gathered, obj)
    return gathered


def broadcast_from_main(value: T, ranks: RankInfo) -> T:
    """Rank 0's `value` on every rank."""
    if not _initialized(ranks):
        return value
    import torch.distributed as dist

    holder = [value]
    dist.broadcast_object_list(holder, src=0)
    return holder[0]


def barrier(ranks: RankInfo) -> None:
    if _initialized(ranks):
        import torch.distributed as dist

        dist.barrier()
