"""What ranks tell each other: everything goes through torch.distributed's object collectives."""

from __future__ import annotations


def _initialized(ranks) -> bool:
    if ranks.world_size == 1:
        return False
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def all_gather_objects(obj, ranks) -> list:
    """Every rank's `obj` on every rank (list in rank order); one element without distribution."""
    if not _initialized(ranks):
        return [obj]
    import torch.distributed as dist

    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered


def broadcast_from_main(value, ranks):
    """Rank 0's `value` on every rank."""
    if not _initialized(ranks):
        return value
    import torch.distributed as dist

    holder = [value]
    dist.broadcast_object_list(holder, src=0)
    return holder[0]


def barrier(ranks) -> None:
    if _initialized(ranks):
        import torch.distributed as dist

        dist.barrier()
