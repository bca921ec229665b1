"""launch.ranks is the one reader of launcher variables: torchrun, OpenMPI, Intel MPI / MPICH (PMI)."""

from __future__ import annotations

import os

import pytest

from bridgetower_mlflow.launch.ranks import RankInfo, needs_launch


@pytest.mark.parametrize("env, expected", [
    ({}, RankInfo(0, 0, 1, 1)),
    ({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}, RankInfo(3, 1, 4, 2)),
    ({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_SIZE": "8",
      "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}, RankInfo(5, 1, 8, 4)),
    ({"PMI_RANK": "6", "MPI_LOCALRANKID": "2", "PMI_SIZE": "8", "MPI_LOCALNRANKS": "4"}, RankInfo(6, 2, 8, 4)),
], ids=["alone", "torchrun", "openmpi", "intel-mpi"])
def test_every_launcher_is_read(env, expected):
    assert RankInfo.from_env(env) == expected


def test_reading_changes_nothing(monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PMI_RANK", "1")
    monkeypatch.setenv("PMI_SIZE", "2")
    monkeypatch.setenv("MPI_LOCALRANKID", "1")
    before = dict(os.environ)
    ranks = RankInfo.from_env()
    assert dict(os.environ) == before
    assert ranks.torch_env() == {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}


def test_devices_here_and_launch_decision():
    alone, ranked = RankInfo(0, 0, 1), RankInfo(1, 1, 8, 4)
    assert (alone.devices_here(2), alone.job_size(2), needs_launch(2, alone)) == (2, 2, True)
    assert (ranked.devices_here(8), ranked.job_size(8), needs_launch(8, ranked)) == (4, 8, False)
    assert alone.torch_env() == {}


def test_a_job_of_several_ranks_without_a_process_group_is_refused_at_its_first_collective():
    """Each rank would otherwise go on with its own numbers (a 'combined' figure of one rank)."""
    import torch.distributed as dist

    from bridgetower_mlflow.launch.collectives import all_gather_objects, barrier, broadcast_from_main

    assert not dist.is_initialized()
    assert all_gather_objects(7, RankInfo(0, 0, 1)) == [7] and broadcast_from_main("run", RankInfo(0, 0, 1)) == "run"
    for collective in (lambda ranks: all_gather_objects(7, ranks), lambda ranks: broadcast_from_main(7, ranks),
                       barrier):
        with pytest.raises(RuntimeError, match="rank 1 of 2: no torch.distributed process group is initialized"):
            collective(RankInfo(1, 1, 2, 2))


def test_a_job_of_several_ranks_combines_through_its_process_group(tmp_path):
    """Two real gloo ranks: every rank sees every rank's object, and rank 0's value."""
    import subprocess
    import sys

    script = tmp_path / "ranks.py"
    script.write_text(  # each rank its own file: the ranks share torchrun's stdout, where their lines interleave
        "import pathlib, sys, torch.distributed as dist\n"
        "from bridgetower_mlflow.launch.collectives import all_gather_objects, barrier, broadcast_from_main\n"
        "from bridgetower_mlflow.launch.ranks import RankInfo\n"
        "dist.init_process_group('gloo')\n"
        "ranks = RankInfo.from_env()\n"
        "seen = (all_gather_objects(ranks.rank * 10, ranks), broadcast_from_main(f'r{ranks.rank}', ranks))\n"
        "barrier(ranks)\n"
        "pathlib.Path(sys.argv[1], f'rank{ranks.rank}').write_text(repr(seen))\n"
        "dist.destroy_process_group()\n")  # gloo aborts a rank that exits with its group still up
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(script), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [(tmp_path / f"rank{rank}").read_text() for rank in (0, 1)] == ["([0, 10], 'r0')"] * 2
