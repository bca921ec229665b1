"""Where this process sits in a job: the only reader of launcher variables.

torchrun sets RANK/LOCAL_RANK/WORLD_SIZE/LOCAL_WORLD_SIZE and the node's rank as GROUP_RANK; OpenMPI
(gaudi_spawn) OMPI_COMM_WORLD_*; Intel MPI and MPICH PMI_RANK/PMI_SIZE and MPI_LOCALRANKID/MPI_LOCALNRANKS.
Reading changes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

RANK_KEYS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
WORLD_KEYS = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
LOCAL_RANK_KEYS = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")
LOCAL_WORLD_KEYS = ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS")
NODE_RANK_KEYS = ("GROUP_RANK", "NODE_RANK")  # torchrun's workers get GROUP_RANK; NODE_RANK is its own input


def _first_int(env: Mapping[str, str], keys: tuple[str, ...], default: int) -> int:
    for key in keys:
        value = env.get(key, "").strip()
        if value.isdigit():
            return int(value)
    return default


@dataclass(frozen=True)
class RankInfo:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int = 1
    group_rank: int | None = None  # the node's rank, where the launcher says it

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def node_rank(self) -> int:
        """This node's place in the job: the launcher's, else from block placement (MPI fills nodes in order)."""
        return self.group_rank if self.group_rank is not None else self.rank // self.local_world_size

    @property
    def whole_job_here(self) -> bool:
        """True when this node runs every rank of the job."""
        return self.world_size == self.local_world_size

    @property
    def launched(self) -> bool:
        """True when an outer launcher (torchrun, mpirun) started this process as one of several."""
        return self.world_size > 1

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RankInfo:
        env = os.environ if env is None else env
        world = max(_first_int(env, WORLD_KEYS, 1), 1)
        local_world = _first_int(env, LOCAL_WORLD_KEYS, world)
        node = _first_int(env, NODE_RANK_KEYS, -1)
        return cls(_first_int(env, RANK_KEYS, 0), _first_int(env, LOCAL_RANK_KEYS, 0), world, max(local_world, 1),
                   node if node >= 0 else None)

    def devices_here(self, devices: int) -> int:
        """Devices this node must hold: the launcher's local size, else what the user asked for."""
        return self.local_world_size if self.launched else devices

    def job_size(self, devices: int) -> int:
        """Processes in the whole job: the launcher's world size, else what the user asked for."""
        return self.world_size if self.launched else devices

    def torch_env(self) -> dict[str, str]:
        """The names torch.distributed's env:// init reads, for launchers that set only their own (mpirun)."""
        if not self.launched:
            return {}
        return {"RANK": str(self.rank), "WORLD_SIZE": str(self.world_size), "LOCAL_RANK": str(self.local_rank),
                "LOCAL_WORLD_SIZE": str(self.local_world_size)}


def needs_launch(devices: int, ranks: RankInfo) -> bool:
    """True when the user asked for N>1 devices and no launcher started us."""
    return devices > 1 and not ranks.launched
