"""What the project takes from MLflow, pinned (issue 31): public APIs only, and a contract for the parts of
MLflow's system-metrics collectors the project drives itself (samplers/mlflow_collectors.py), so an
MLflow upgrade that changes them fails here, not as a silently empty `system/` series. And MLflow's own
system-metrics variables, as the project honours them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.environment import SystemMetricsSettings, system_metrics_settings
from bridgetower_mlflow.errors import ConfigError
from bridgetower_mlflow.samplers.mlflow_collectors import host_collectors, mlflow_collectors
from bridgetower_mlflow.telemetry.system.monitor import NODE_SERIES
from bridgetower_mlflow.tracking.runs import create_named_run, default_experiment_id
from bridgetower_mlflow.tracking.store_init import ready_store

from tests.fakes.native_libs import gpus, nvml_stub  # noqa: F401 - nvml_stub: a fixture

PACKAGE = Path(__file__).resolve().parents[2] / "bridgetower_mlflow"


def _private_mlflow_uses(path: Path) -> list[str]:
    """`from mlflow._x import y`, `from mlflow.x import _y`, `mlflow.x._y`: names MLflow may change any release."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mlflow":
            names = [*node.module.split("."), *(alias.name for alias in node.names)]
            if any(name.startswith("_") for name in names):
                found.append(f"{path.name}:{node.lineno} from {node.module} import {names[-1]}")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            chain, inner = [node.attr], node.value
            while isinstance(inner, ast.Attribute):
                chain.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id == "mlflow":
                found.append(f"{path.name}:{node.lineno} mlflow.{'.'.join(reversed(chain))}")
    return found


def test_the_package_calls_no_private_mlflow_api():
    """Before: tracking/store_init.py's `_get_store` and tracking/runs.py's `fluent._get_experiment_id`."""
    found = [use for path in sorted(PACKAGE.rglob("*.py")) for use in _private_mlflow_uses(path)]
    assert found == []


def test_ready_store_creates_a_fresh_sqlite_schema_that_later_clients_use(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}"
    (tmp_path / "fresh").mkdir()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    ready_store()
    assert (tmp_path / "fresh" / "mlflow.db").stat().st_size > 0
    assert [e.experiment_id for e in MlflowClient(uri).search_experiments()] == ["0"]


def test_a_run_without_an_experiment_name_goes_where_mlflow_would_put_it(sqlite_uri, monkeypatch):
    client = MlflowClient(sqlite_uri)
    assert default_experiment_id() == "0"
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "from-the-environment")
    created = default_experiment_id()
    assert client.get_experiment_by_name("from-the-environment").experiment_id == created != "0"
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME")
    other = client.create_experiment("by-id")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", other)
    run_id = create_named_run("", "launcher", {"k": "v"})
    run = client.get_run(run_id)
    assert (run.info.experiment_id, run.info.status, run.data.tags["k"]) == (other, "RUNNING", "v")
    assert default_experiment_id("named") == client.get_experiment_by_name("named").experiment_id  # a name wins


def test_run_data_still_carries_each_metrics_latest_step(sqlite_uri):
    """RunSession reads `RunData._metric_objs` (each key's latest step, which the public `metrics` dict drops) so
    a resumed run does not log a step twice: the one private name the package still reads, pinned here."""
    client = MlflowClient(sqlite_uri)
    run_id = client.create_run(client.create_experiment("steps")).info.run_id
    for step in (1, 7, 3):
        client.log_metric(run_id, "loss", float(step), step=step)
    assert {m.key: m.step for m in client.get_run(run_id).data._metric_objs} == {"loss": 7}


# --- MLflow's collectors as the project drives them ----------------------------------------------------------
CPU_NAMES = {"cpu_utilization_percentage", "system_memory_usage_megabytes", "system_memory_usage_percentage"}
DISK_NAMES = {"disk_usage_percentage", "disk_usage_megabytes", "disk_available_megabytes"}
NETWORK_NAMES = {"network_receive_megabytes", "network_transmit_megabytes"}


def test_mlflows_cpu_disk_and_network_collectors_sample_aggregate_and_clear_as_driven():
    collectors = mlflow_collectors(0)
    assert [type(c.collector).__name__ for c in collectors] == ["CPUMonitor", "DiskMonitor", "NetworkMonitor"]
    for collector, names in zip(collectors, (CPU_NAMES, DISK_NAMES, NETWORK_NAMES)):
        sample = collector.sample()
        assert names <= set(sample) and all(isinstance(v, (int, float)) for v in sample.values()), sample
        assert dict(collector.collector.aggregate_metrics()) == {}  # cleared: the next sample starts afresh
        assert names <= set(collector.sample())  # and samples again
    (host,) = host_collectors()
    assert CPU_NAMES <= set(host.sample())
    assert CPU_NAMES <= set(NODE_SERIES)  # the per-node series the monitor keeps are MLflow's CPU names


def test_mlflows_gpu_collector_reads_the_handles_the_project_sets(nvml_stub, monkeypatch):
    """JobGpuCollector replaces GPUMonitor.gpu_handles with the job's GPUs; MLflow names them gpu_<position>_."""
    from mlflow.system_metrics.metrics.gpu_monitor import GPUMonitor

    nvml_stub.set(gpus(3))
    monitor = GPUMonitor()
    assert len(monitor.gpu_handles) == 3
    monitor.gpu_handles = monitor.gpu_handles[2:]
    monitor.collect_metrics()
    names = set(monitor.aggregate_metrics())
    assert {"gpu_0_utilization_percentage", "gpu_0_memory_usage_megabytes", "gpu_0_memory_usage_percentage",
            "gpu_0_power_usage_watts", "gpu_0_power_usage_percentage"} <= names
    assert not [name for name in names if name.startswith(("gpu_1_", "gpu_2_"))]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    (job_gpu,) = [c for c in mlflow_collectors(1) if type(c.collector).__name__ == "GPUMonitor"]
    assert {name.split("_")[1] for name in job_gpu.sample()} == {"2"}  # named by the NVML index


# --- MLflow's system-metrics variables --------------------------------------------------------------------------
@pytest.mark.parametrize("environ, settings", [
    ({}, SystemMetricsSettings(True, 2.0)),
    ({"MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING": "false"}, SystemMetricsSettings(False, 2.0)),
    ({"MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING": "0", "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL": "10"},
     SystemMetricsSettings(False, 10.0)),
    ({"MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING": "TRUE", "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL": "0.5"},
     SystemMetricsSettings(True, 0.5)),
])
def test_mlflows_system_metrics_variables_are_honoured(environ, settings):
    assert system_metrics_settings(environ) == settings


@pytest.mark.parametrize("environ, line", [
    ({"MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL": "2s"},
     "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL: invalid value '2s'; allowed: a number of seconds above 0 (unset: 2)"),
    ({"MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL": "0"},
     "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL: invalid value '0'; allowed: a number of seconds above 0 (unset: 2)"),
    ({"MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL": "nan"},
     "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL: invalid value 'nan'; allowed: a number of seconds above 0 (unset: 2)"),
    ({"MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING": "off"},
     "MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING: invalid value 'off'; allowed: true or false (also 1 or 0), as MLflow "
     "reads it"),
])
def test_a_bad_system_metrics_variable_is_one_line_naming_it(environ, line):
    with pytest.raises(ConfigError) as raised:
        system_metrics_settings(environ)
    assert str(raised.value) == line and raised.value.exit_code == 2


def test_a_run_with_system_metrics_off_logs_no_system_series(cache_dir, sqlite_uri):
    """MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING=false, as MLflow users turn its monitor off: the run trains and is
    measured, and no `system/...` series is sampled."""
    from tests.conftest import run_cli

    tiny = ["--max-steps", "3", "--logging-steps", "1", "--throughput-warmup-steps", "1",
            "--per-device-train-batch-size", "4", "--max-train-samples", "16", "--max-eval-samples", "4",
            "--max-seq-length", "16", "--dataloader-num-workers", "0", "--log-model", "false"]
    done = run_cli(["train", *tiny], env_extra={"MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING": "false"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(sqlite_uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert "train_loss" in run.data.metrics
    assert [key for key in run.data.metrics if key.startswith("system/")] == []
