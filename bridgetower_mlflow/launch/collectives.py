"""What ranks tell each other: everything goes through torch.distributed's object collectives.

The process group is the Trainer's (TrainingArguments starts it through accelerate, with the backend the recipe
chose): every collective here comes after prepare. A job of several ranks without one is refused at the first
collective instead of each rank going on with its own numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from .ranks import RankInfo

T = TypeVar("T")


def _initialized(ranks: RankInfo) -> bool:
    """False for a job of one rank; True where the job's process group is up; raises where it is not."""
    if ranks.world_size == 1:
        return False
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError(f"rank {ranks.rank} of {ranks.world_size}: no torch.distributed process group is "
                           "initialized, so the ranks cannot combine their figures (the Trainer's arguments "
                           "start it; build them before any collective)")
    return True


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
