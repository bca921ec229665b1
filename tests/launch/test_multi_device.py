"""Multi-process CPU runs (gloo): exactly one MLflow run per job, throughput over all ranks."""

import os
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import BIN, free_port, mlflow_run, no_running_runs

pytestmark = pytest.mark.slow
SMALL = {"accel": "cpu", "devices": 2, "max_steps": 6, "logging_steps": 2, "per_device_train_batch_size": 16,
         "dataloader_num_workers": 0, "log_model": "false"}


def _runs(uri, experiment="0"):
    client = MlflowClient(uri)
    if not experiment.isdigit():
        experiment = client.get_experiment_by_name(experiment).experiment_id
    return client.search_runs([experiment])


def _check_two_rank_run(run):
    assert run.info.status == "FINISHED"
    assert run.data.tags["accelerator.count"] == "2"
    metrics = run.data.metrics
    assert metrics["train_samples_per_second"] == pytest.approx(2 * metrics["train_samples_per_second_per_device"])
    assert 0 <= metrics["dataloader_wait_fraction"] <= 1


def test_mlflow_run_with_devices_2_launches_ranks_and_logs_one_run(cache_dir, sqlite_uri):
    done = mlflow_run(SMALL, "multi")
    assert done.returncode == 0, done.stderr[-3000:]
    runs = _runs(sqlite_uri, "multi")
    assert len(runs) == 1
    _check_two_rank_run(runs[0])
    assert done.stdout.count("open it:") == 1


def _train_args(**changes) -> list[str]:
    args = ["-m", "bridgetower_mlflow", "train"]
    for key, value in {**SMALL, **changes}.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def _outer_torchrun(extra_env):
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *_train_args()]
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **extra_env}
    return subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)


def test_outer_torchrun_with_run_id_for_every_rank_gives_one_run(cache_dir, sqlite_uri):
    client = MlflowClient(sqlite_uri)
    run_id = client.create_run("0").info.run_id
    done = _outer_torchrun({"MLFLOW_RUN_ID": run_id})
    assert done.returncode == 0, done.stderr[-3000:]
    runs = _runs(sqlite_uri)
    assert [r.info.run_id for r in runs] == [run_id]
    _check_two_rank_run(runs[0])
    assert no_running_runs(sqlite_uri) == []


def test_two_nodes_on_loopback_give_one_run(cache_dir, sqlite_uri, tmp_path):
    """`torchrun --nnodes 2` with node ranks 0 and 1 on 127.0.0.1 (one process each), no MLFLOW_RUN_ID: rank 0
    creates the only run (this also covers the single-node outer torchrun without a run id). Each node's host
    is monitored as system/node_<n>/..., and the job's worker CPU counts every rank's workers."""
    port, nodes = free_port(), []
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL": "0.5"}
    try:
        for node_rank in (0, 1):
            args = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node_rank={node_rank}",
                    "--nproc_per_node=1", "--master_addr=127.0.0.1", f"--master_port={port}",
                    *_train_args(dataloader_num_workers=1)]
            folder = tmp_path / f"node{node_rank}"  # each node its own working folder, as on two machines
            folder.mkdir()
            with open(tmp_path / f"node{node_rank}.log", "w") as log:
                nodes.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=folder,
                                              start_new_session=True))
        codes = [node.wait(timeout=600) for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:
                os.killpg(node.pid, 9)
    logs = [(tmp_path / f"node{r}.log").read_text() for r in (0, 1)]
    assert codes == [0, 0], "\n".join(log[-2000:] for log in logs)
    runs = _runs(sqlite_uri)
    assert len(runs) == 1
    _check_two_rank_run(runs[0])
    assert all(f"runs/{runs[0].info.run_id}" in log for log in logs)  # each node's console links the one run
    assert no_running_runs(sqlite_uri) == []
    _check_every_node_observed(MlflowClient(sqlite_uri), runs[0].info.run_id)


def _check_every_node_observed(client, run_id):
    """Each node's host series (several points), and worker counts: one per node, two in the job."""
    series = {}
    for node in (0, 1):
        for name in ("cpu_utilization_percentage", "system_memory_usage_megabytes", "dataloader_workers_count"):
            key = f"system/node_{node}/{name}"
            series[key] = sorted((m.step, m.timestamp, m.value) for m in client.get_metric_history(run_id, key))
            print(key, series[key])  # the per-node series of a 2-node run, for the notes (pytest -s shows them)
            assert len(series[key]) >= 3, key
        assert max(v for _, _, v in series[f"system/node_{node}/dataloader_workers_count"]) == 1
        assert all(v > 0 for _, _, v in series[f"system/node_{node}/system_memory_usage_megabytes"])
    job = sorted((m.step, m.value) for m in client.get_metric_history(run_id, "system/dataloader_workers_count"))
    print("system/dataloader_workers_count", job)
    assert max(v for _, v in job) == 2  # both ranks' workers, on both nodes
