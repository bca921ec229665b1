"""Multi-device runs: start N ranks ourselves, or join an outer torchrun/mpirun; gather to rank 0."""

from __future__ import annotations

import logging
import os
import subprocess
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RankInfo:
    rank: int
    local_rank: int
    world_size: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls) -> "RankInfo":
        """torchrun sets RANK/WORLD_SIZE; mpirun (gaudi_spawn style) sets OMPI_COMM_WORLD_*."""
        env = os.environ
        rank = env.get("RANK", env.get("OMPI_COMM_WORLD_RANK", env.get("PMI_RANK", "0")))
        world = env.get("WORLD_SIZE", env.get("OMPI_COMM_WORLD_SIZE", env.get("PMI_SIZE", "1")))
        local = env.get("LOCAL_RANK", env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
        if int(world) > 1:  # torch.distributed's env:// init reads these names, also under mpirun
            env.setdefault("RANK", str(rank))
            env.setdefault("WORLD_SIZE", str(world))
            env.setdefault("LOCAL_RANK", str(local))
        return cls(int(rank), int(local), int(world))


def needs_launch(devices: int, ranks: RankInfo) -> bool:
    """True when the user asked for N>1 devices and no launcher started us."""
    return devices > 1 and ranks.world_size == 1


def launch_ranks(adapter, devices: int, module_argv: list[str], run_id: str) -> int:
    """Run `devices` ranks of `train`; every rank sees MLFLOW_RUN_ID, only rank 0 uses it."""
    env = dict(os.environ, MLFLOW_RUN_ID=run_id, BRIDGETOWER_LAUNCHED="1")
    command = adapter.launch_command(devices, module_argv)
    log.info("launching %d ranks: %s", devices, " ".join(command))
    return subprocess.call(command, env=env)


def gather_to_main(obj, ranks: RankInfo) -> list:
    """Every rank's `obj` on every rank (list in rank order); one element without distribution."""
    if ranks.world_size == 1:
        return [obj]
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return [obj]
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered


def barrier(ranks: RankInfo) -> None:
    if ranks.world_size > 1:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.barrier()
