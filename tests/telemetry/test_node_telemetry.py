"""Telemetry of every node: node ranks from the launcher, per-node series names, the job-wide worker sum, the
sampler over several ranks, and a node's own buffer spilling and replaying its series (real sqlite store)."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.launch.ranks import RankInfo
from bridgetower_mlflow.samplers.host_cpu import HostCpuSampler
from bridgetower_mlflow.samplers.mlflow_collectors import host_collectors
from bridgetower_mlflow.telemetry.system.monitor import SeriesNames, SystemMonitor, sum_by_step
from bridgetower_mlflow.tracking.metric_buffer import MetricBuffer
from bridgetower_mlflow.tracking.spill import upload_spill


@pytest.mark.parametrize("env, node", [
    ({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1"}, 1),
    ({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1", "NODE_RANK": "1"}, 1),
    ({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_SIZE": "8",
      "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}, 1),  # no node rank from MPI: block placement
    ({}, 0),
], ids=["torchrun-group-rank", "node-rank", "mpi-block-placement", "alone"])
def test_node_rank_comes_from_the_launcher(env, node):
    assert RankInfo.from_env(env).node_rank == node


def test_whole_job_here_only_when_this_node_runs_every_rank():
    assert RankInfo(0, 0, 2, 2).whole_job_here and not RankInfo(0, 0, 2, 1).whole_job_here


def test_series_names_of_each_role():
    alone, rank0, other = SeriesNames(), SeriesNames(0), SeriesNames(1, main=False)
    assert alone.keys("dataloader_workers_count") == ("system/dataloader_workers_count",)  # today's names
    assert alone.kept == ()
    assert rank0.keys("cpu_utilization_percentage") == ("system/node_0/cpu_utilization_percentage",
                                                       "system/cpu_utilization_percentage")
    assert rank0.keys("dataloader_workers_cpu_percentage") == ("system/node_0/dataloader_workers_cpu_percentage",)
    assert rank0.keys("disk_usage_percentage") == ("system/disk_usage_percentage",)
    assert other.keys("system_memory_usage_megabytes") == ("system/node_1/system_memory_usage_megabytes",)
    assert other.keys("disk_usage_percentage") == ()
    assert "dataloader_workers_count" in other.kept


def test_job_series_sum_what_every_node_sampled_at_the_same_moment_not_at_the_same_step_number():
    # node 1 started 2.6 s after node 0 (a 2-node run in CI): its step 1 is node 0's step 6, not its step 1
    node0 = [(step, 1000 + 500 * step, {"dataloader_workers_count": float(step >= 6)}) for step in range(11)]
    node1 = [(step, 3600 + 500 * step, {"dataloader_workers_count": float(step >= 1)}) for step in range(6)]
    summed = sum_by_step([node0, node1])
    assert [step for step, _, _ in summed] == [6, 7, 8, 9, 10]  # the moments both nodes were sampling
    assert [values["dataloader_workers_count"] for _, _, values in summed] == [2.0] * 5
    assert [timestamp for _, timestamp, _ in summed] == [4000, 4500, 5000, 5500, 6000]  # node 0's moments
    assert sum_by_step([]) == []


def _rank_with_a_worker(started, release, burn_seconds=0.0):
    """A stand-in rank: it spends `burn_seconds` of CPU, starts one worker (a child) and waits."""
    spent = time.process_time() + burn_seconds
    while time.process_time() < spent:
        pass
    context = multiprocessing.get_context("fork")
    worker = context.Process(target=release.wait, args=(60,))
    worker.start()
    started.set()
    worker.join(60)


def test_sampler_over_two_ranks_counts_both_ranks_workers_and_survives_one_ending():
    context = multiprocessing.get_context("fork")
    ranks, releases = [], []
    for burn in (0.0, 0.3):
        started, release = context.Event(), context.Event()
        rank = context.Process(target=_rank_with_a_worker, args=(started, release, burn))
        rank.start()
        assert started.wait(60)
        ranks.append(rank)
        releases.append(release)
    try:
        sampler = HostCpuSampler(*(rank.pid for rank in ranks))
        assert sampler.sample()["dataloader_workers_count"] == 2.0
        before = sampler.cpu_seconds().main
        assert before >= 0.25, before  # the second rank's 0.3 s are counted
        releases[1].set()
        ranks[1].join(60)
        after = sampler.sample()  # that rank has ended: no error
        assert after["dataloader_workers_count"] == 1.0
        kept = sampler.cpu_seconds().main
        assert kept >= before - 0.02, (before, kept)  # its CPU seconds are not taken back
    finally:
        for release, rank in zip(releases, ranks):
            release.set()
            rank.join(60)


def test_a_node_buffer_spills_its_series_in_an_outage_and_they_replay_into_the_run(sqlite_uri, tmp_path):
    """What another node does: its host series through its own MetricBuffer on the run; the server away."""
    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("nodes")).info.run_id
    spill = tmp_path / f"{run_id}.node_1.spill.jsonl"
    away = MlflowClient("http://127.0.0.1:9")  # nothing listens: every send fails
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"], os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = "0", "2"
    try:
        buffer = MetricBuffer(away, run_id, spill, flush_interval=0.05)
        monitor = SystemMonitor(buffer, [HostCpuSampler(), *host_collectors()], interval=0.05,
                                names=SeriesNames(1, main=False), first_step=4).start()
        deadline = time.monotonic() + 30
        while monitor.step < 7 and time.monotonic() < deadline:
            time.sleep(0.02)
        monitor.stop()
        assert buffer.close(timeout=0.5) > 0 and spill.exists()
    finally:
        for key in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT"):
            os.environ.pop(key, None)
    upload_spill(spill)
    for name in ("cpu_utilization_percentage", "system_memory_usage_megabytes", "dataloader_workers_count"):
        steps = sorted(m.step for m in client.get_metric_history(run_id, f"system/node_1/{name}"))
        assert len(steps) >= 3 and steps[0] == 4, (name, steps)
    assert client.get_metric_history(run_id, "system/dataloader_workers_count") == []  # the job's: summed at the end
