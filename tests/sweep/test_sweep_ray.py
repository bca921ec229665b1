"""`sweep --backend ray` on a real Ray cluster (Ray's own multi-node test cluster on loopback: a head and one
more node, started plainly, two CPUs each, no custom resources) with a real `mlflow server`.

One sweep runs the real `train` (tiny preset); the failure paths use a fake train that sleeps, so the
kill, node-loss and Ctrl-C checks cost seconds, not minutes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from itertools import combinations
from pathlib import Path

import pytest
from click.testing import CliRunner

from bridgetower_mlflow.errors import ConfigError
from bridgetower_mlflow.sweep.backends.ray.checks import (
    HOST_RESOURCE,
    cell_request,
    check_feasible,
    parse_ray_address,
    task_options,
)
from bridgetower_mlflow.sweep.backends.ray.nodes import AFFINITY, SHARED, SLOT, NodePool, choose_placement
from bridgetower_mlflow.sweep.command import sweep_command

from tests.conftest import BIN, MlflowServer, no_running_runs, run_cli

# Before anything imports ray: this machine answers on loopback only, and without this Ray (2.60) rewrites
# 127.0.0.1 to the primary interface's address, where nothing listens, and waits for ever.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# Two CPUs a node, a cell asks for one: Ray alone would put two cells on a node; the driver's node affinity must not.
NODE = {"num_cpus": 2, "object_store_memory": 80 * 2**20, "node_ip_address": "127.0.0.1"}

FAKE_TRAIN = textwrap.dedent("""
    import argparse, os, pathlib, sys, time
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataloader-num-workers", type=int)
    parser.add_argument("--fake-seconds", type=float, default=2.0)
    parser.add_argument("--fake-pid-dir")
    args, _ = parser.parse_known_args()
    pathlib.Path(args.fake_pid_dir, f"w{args.dataloader_num_workers}.pid").write_text(str(os.getpid()))
    time.sleep(args.fake_seconds)
    from mlflow import MlflowClient
    client, run_id = MlflowClient(), os.environ["MLFLOW_RUN_ID"]
    client.log_metric(run_id, "train_samples_per_second", 10.0 * (1 + args.dataloader_num_workers))
    client.set_terminated(run_id, "FINISHED")
""")


@pytest.fixture(scope="module")
def ray_cluster(cache_dir):
    """Head + one node on loopback, as a plain `ray start` makes them: no custom resources."""
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")
    from ray.cluster_utils import Cluster

    patch = pytest.MonkeyPatch()
    scratch = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths are limited
    patch.setenv("RAY_TMPDIR", scratch)
    patch.delenv("RAY_ADDRESS", raising=False)
    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()
    patch.undo()
    shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """One real `mlflow server` for the module (each test has its own experiment): a start costs seconds."""
    folder = tmp_path_factory.mktemp("tracking")
    server = MlflowServer(f"sqlite:///{folder / 'server.db'}", folder / "artifacts").start()
    yield server
    server.stop()


@pytest.fixture
def server(shared_server, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", shared_server.url)
    return shared_server


@pytest.fixture
def fake_train(tmp_path, monkeypatch):
    """The driver sends BRIDGETOWER_TRAIN_CMD to the nodes; returns the folder its pid files land in."""
    script = tmp_path / "fake_train.py"
    script.write_text(FAKE_TRAIN)
    monkeypatch.setenv("BRIDGETOWER_TRAIN_CMD", f"{sys.executable} {script}")
    (tmp_path / "pids").mkdir()
    return tmp_path / "pids"


def _sweep(cluster, experiment, *args, fake_seconds=None, pid_dir=None) -> list[str]:
    argv = ["sweep", "--backend", "ray", "--ray-address", cluster.address, "--accel", "cpu",
            "--device-decode", "false", "--experiment-name", experiment, *args]
    return argv + (["--", "--fake-seconds", str(fake_seconds), "--fake-pid-dir", str(pid_dir)] if pid_dir else [])


def _runs(url: str, experiment: str):
    """(parent, {run name: child}) of the one sweep in `experiment`."""
    from mlflow import MlflowClient

    client = MlflowClient(url)
    experiment_id = client.get_experiment_by_name(experiment).experiment_id
    (parent,) = client.search_runs([experiment_id], "tags.`bridgetower.run_kind` = 'sweep'")
    children = client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    return parent, {run.info.run_name: run for run in children}


@contextlib.contextmanager
def _ends(driver):
    """A sweep driver the test started is gone when the test is, whatever failed: its cells then leave the
    module's cluster, and the next test's cells find their nodes free."""
    try:
        yield driver
    finally:
        if driver.poll() is None:
            driver.send_signal(signal.SIGINT)  # the sweep's own cancel: its cells and their runs end
            try:
                driver.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                driver.kill()
                driver.communicate()


def _wait_for(paths, timeout=60.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while not all(path.exists() and path.read_text() for path in paths):
        assert time.monotonic() < deadline, f"never appeared: {paths}"
        time.sleep(0.2)
    return [int(path.read_text()) for path in paths]


def _wait_for_runs(url: str, experiment: str, expected: dict[str, str], timeout=60.0) -> None:
    """Until the sweep's children are `expected` ({run name: status})."""
    deadline, seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            seen = {name: run.info.status for name, run in _runs(url, experiment)[1].items()}
        except (ValueError, AttributeError):  # the experiment or the sweep's run is not there yet
            seen = None
        if seen == expected:
            return
        time.sleep(0.2)
    raise AssertionError(f"waited {timeout} s for the cells {expected}; saw {seen}")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.slow
def test_four_cells_run_two_at_a_time_on_distinct_nodes(ray_cluster, server):
    started = time.monotonic()
    result = run_cli(_sweep(ray_cluster, "four", "--workers", "0,1", "--repeats", "2", "--model", "tiny",
                            "--max-steps", "5", "--per-device-train-batch-size", "4", "--",
                            "--max-train-samples", "32", "--max-eval-samples", "16", "--log-model", "false"),
                     timeout=900)  # 4 real trainings on 2 cores: ~2-8 min as the machine's load goes
    print(f"4-cell ray sweep: {time.monotonic() - started:.1f} s wall")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    parent, children = _runs(server.url, "four")
    assert sorted(children) == ["cpu w0 decode=cpu r1", "cpu w0 decode=cpu r2",
                                "cpu w1 decode=cpu r1", "cpu w1 decode=cpu r2"]
    for run in children.values():
        assert run.info.status == "FINISHED" and run.data.tags["bridgetower.run_kind"] == "train"
        assert run.data.tags["host.name"] and run.data.metrics["train_samples_per_second"] > 0
        assert "error" not in run.data.tags
    windows = [(run.info.start_time, run.info.end_time, run.data.tags["ray.node_id"]) for run in children.values()]
    overlapping = [(a, b) for a, b in combinations(windows, 2) if a[0] < b[1] and b[0] < a[1]]
    assert overlapping, windows  # two cells at a time ...
    assert all(a[2] != b[2] for a, b in overlapping), overlapping  # ... never two on one node
    assert len({node for _, _, node in windows}) == 2
    tags = parent.data.tags
    assert tags["sweep.backend"] == "ray" and tags["sweep.finished"] == "4" and tags["sweep.failed"] == "0"
    assert "one cell per node by node affinity" in tags["sweep.notes"]
    assert sorted(line.split("] starting ")[1] for line in result.stdout.splitlines() if "] starting " in line) == \
        sorted(children)  # told as each cell got its node
    assert "| w1 decode=cpu |" in tags["mlflow.note.content"]  # compare ran over the children
    assert parent.info.status == "FINISHED" and no_running_runs(server.url) == []


@pytest.mark.slow
def test_a_cell_killed_mid_run_fails_and_the_rest_finish(ray_cluster, server, fake_train):
    driver = subprocess.Popen([str(BIN / "bridgetower-mlflow"), *_sweep(
        ray_cluster, "killed", "--workers", "0,1,2", "--repeats", "1", fake_seconds=6, pid_dir=fake_train)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with _ends(driver):
        (victim,) = _wait_for([fake_train / "w1.pid"])
        os.kill(victim, signal.SIGKILL)
        output, _ = driver.communicate(timeout=120)
    assert driver.returncode == 1, output
    parent, children = _runs(server.url, "killed")
    killed = children["cpu w1 decode=cpu r1"]
    assert killed.info.status == "FAILED" and "SIGKILL" in killed.data.tags["error"]
    assert [children[f"cpu w{w} decode=cpu r1"].info.status for w in (0, 2)] == ["FINISHED", "FINISHED"]
    assert all(run.data.tags.get("ray.node_id") for run in children.values())
    assert parent.data.tags["sweep.failed"] == "1" and "SIGKILL" in parent.data.tags["sweep.notes"]
    assert no_running_runs(server.url) == []


@pytest.mark.slow
def test_a_lost_node_fails_its_cell_is_not_picked_again_and_the_rest_finish(ray_cluster, server, fake_train):
    extra = ray_cluster.add_node(**NODE)
    ray_cluster.wait_for_nodes()
    driver = subprocess.Popen([str(BIN / "bridgetower-mlflow"), *_sweep(
        ray_cluster, "lost", "--workers", "0,1,2,3", "--repeats", "1", fake_seconds=8, pid_dir=fake_train)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with _ends(driver):
        try:
            _wait_for([fake_train / f"w{w}.pid" for w in (0, 1, 2)])  # three cells, three nodes; w3 waits
            assert not (fake_train / "w3.pid").exists()
        finally:  # the module's cluster goes on with its two nodes, whatever happened here
            ray_cluster.remove_node(extra, allow_graceful=False)
        output, _ = driver.communicate(timeout=120)
    assert driver.returncode == 1, output
    _, children = _runs(server.url, "lost")
    assert sorted(run.info.status for run in children.values()) == ["FAILED", "FINISHED", "FINISHED", "FINISHED"]
    (lost,) = [run for run in children.values() if run.info.status == "FAILED"]
    assert lost.data.tags["ray.node_id"] == extra.node_id and "node" in lost.data.tags["error"]
    later = children["cpu w3 decode=cpu r1"]  # started after the loss, on a node still alive
    assert later.info.status == "FINISHED" and later.data.tags["ray.node_id"] != extra.node_id
    assert no_running_runs(server.url) == []


@pytest.mark.slow
def test_ctrl_c_cancels_the_cells_and_leaves_no_run_running(ray_cluster, server, fake_train):
    driver = subprocess.Popen([str(BIN / "bridgetower-mlflow"), *_sweep(
        ray_cluster, "ctrl-c", "--workers", "0,1,2", "--repeats", "1", fake_seconds=300, pid_dir=fake_train)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as from a terminal, even under CI
    with _ends(driver):
        trains = _wait_for([fake_train / "w0.pid", fake_train / "w1.pid"])
        _wait_for_runs(server.url, "ctrl-c", {"cpu w0 decode=cpu r1": "RUNNING", "cpu w1 decode=cpu r1": "RUNNING"})
        driver.send_signal(signal.SIGINT)
        output, _ = driver.communicate(timeout=90)
    assert driver.returncode != 0 and "cancelling" in output, output
    parent, children = _runs(server.url, "ctrl-c")
    assert parent.info.status == "KILLED"
    assert {name: run.info.status for name, run in children.items()} == {
        "cpu w0 decode=cpu r1": "KILLED", "cpu w1 decode=cpu r1": "KILLED"}  # w2 never started: no run
    assert no_running_runs(server.url) == []
    assert not any(_alive(pid) for pid in trains)


@pytest.mark.slow
def test_a_node_with_another_project_version_fails_its_cell(ray_cluster, server, fake_train, tmp_path):
    metadata = tmp_path / "shadow" / "bridgetower_mlflow-9.9.9.dist-info"
    metadata.mkdir(parents=True)
    (metadata / "METADATA").write_text("Metadata-Version: 2.1\nName: bridgetower-mlflow\nVersion: 9.9.9\n")
    argv = _sweep(ray_cluster, "version", "--workers", "0", "--repeats", "1", fake_seconds=0, pid_dir=fake_train)
    result = run_cli(argv, env_extra={"PYTHONPATH": str(metadata.parent)})  # the driver reads 9.9.9, the nodes not
    assert result.returncode == 1, result.stdout + result.stderr
    _, children = _runs(server.url, "version")
    (run,) = children.values()
    assert run.info.status == "FAILED" and run.data.tags["ray.node_id"]
    assert "driver has 9.9.9" in run.data.tags["error"] and "install the same version" in run.data.tags["error"]
    assert not (fake_train / "w0.pid").exists()  # train never started


def test_a_local_tracking_store_is_refused_before_any_run(sqlite_uri):
    result = CliRunner().invoke(sweep_command, ["--backend", "ray", "--experiment-name", "ray"])
    assert result.exit_code == 2
    assert "tracking_uri: invalid value 'sqlite:" in result.stderr and "http(s) tracking server" in result.stderr
    from mlflow import MlflowClient

    assert MlflowClient(sqlite_uri).get_experiment_by_name("ray") is None


def test_an_unreachable_ray_address_fails_in_seconds(monkeypatch):
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    started = time.monotonic()
    result = CliRunner().invoke(sweep_command, ["--backend", "ray", "--ray-address", "127.0.0.1:9"])
    assert result.exit_code == 2 and "ray_address: invalid value '127.0.0.1:9'" in result.stderr
    assert "nothing answers at 127.0.0.1:9" in result.stderr, result.stderr
    assert time.monotonic() - started < 30, f"refused {time.monotonic() - started:.1f} s after the sweep started"


def test_sweep_help_does_not_import_ray():
    probe = ("import sys\nfrom bridgetower_mlflow.cli import main\ntry:\n    main(['sweep', '--help'])\n"
             "except SystemExit:\n    pass\nprint('ray' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip().splitlines()[-1] == "False", done.stderr


@pytest.mark.slow
def test_nodes_with_a_bridgetower_host_slot_run_the_cells_one_per_slot(ray_cluster, server, fake_train):
    slotted = ray_cluster.add_node(**NODE, resources={HOST_RESOURCE: 1})
    ray_cluster.wait_for_nodes()
    try:
        result = run_cli(_sweep(ray_cluster, "slot", "--workers", "0,1", "--repeats", "1", fake_seconds=1,
                                pid_dir=fake_train))
    finally:
        ray_cluster.remove_node(slotted)
    assert result.returncode == 0, result.stdout + result.stderr
    parent, children = _runs(server.url, "slot")
    assert [run.data.tags["ray.node_id"] for run in children.values()] == [slotted.node_id] * 2  # only it has one
    first, second = sorted((run.info.start_time, run.info.end_time) for run in children.values())
    assert first[1] <= second[0]  # one slot: one cell at a time
    assert "2 node(s) without a `bridgetower_host` slot run no cells" in parent.data.tags["sweep.notes"]


def test_a_cell_asks_for_its_accelerators_and_can_be_pinned_to_a_node():
    gpu = task_options(cell_request("cuda", 8), "h100 w0 r1")
    assert (gpu["num_gpus"], gpu["num_cpus"], gpu["resources"]) == (8, 0, {})
    assert gpu["max_retries"] == 0 and gpu["retry_exceptions"] is False  # a retried cell would log twice
    hpu = task_options({**cell_request("gaudi", 8), HOST_RESOURCE: 1.0}, "gaudi2 w0 r1", "pinned")
    assert hpu["resources"] == {"HPU": 8, "bridgetower_host": 1} and isinstance(hpu["resources"]["HPU"], int)
    assert hpu["scheduling_strategy"] == "pinned"
    assert task_options(cell_request("cpu", 2), "cpu")["num_cpus"] == 2
    assert cell_request("cpu", 1) == {"CPU": 1.0}


def _node(node_id: str, alive=True, **resources) -> dict:
    return {"NodeID": node_id * 56, "Alive": alive, "Resources": resources}


def test_placement_uses_the_slot_where_a_fitting_node_has_one_else_node_affinity():
    plain = [_node("a", CPU=8.0), _node("b", CPU=96.0, GPU=8.0)]
    affinity = choose_placement({"GPU": 8.0}, plain, exclusive=True)
    assert (affinity.mode, affinity.request) == (AFFINITY, {"GPU": 8.0}) and "1 usable node(s)" in affinity.notes[0]
    mixed = [*plain, _node("c", CPU=96.0, GPU=8.0, bridgetower_host=1.0)]
    slot = choose_placement({"GPU": 8.0}, mixed, exclusive=True)
    assert (slot.mode, slot.request) == (SLOT, {"GPU": 8.0, HOST_RESOURCE: 1.0})
    assert slot.notes == ("1 node(s) without a `bridgetower_host` slot run no cells",)
    # a slot on a node that cannot run the cell does not switch the sweep to slots
    only_cpu_slot = [_node("a", CPU=8.0, bridgetower_host=1.0), _node("b", CPU=96.0, GPU=8.0)]
    assert choose_placement({"GPU": 8.0}, only_cpu_slot, exclusive=True).mode == AFFINITY
    assert choose_placement({"GPU": 8.0}, mixed, exclusive=False).mode == SHARED


def test_the_node_pool_hands_out_free_nodes_and_never_a_lost_one():
    cluster = [_node("a", CPU=2.0), _node("b", CPU=2.0), _node("c", GPU=1.0), _node("d", alive=False, CPU=2.0)]
    pool = NodePool({"CPU": 1.0}, lambda: cluster)
    first, second = pool.claim(), pool.claim()
    assert {first, second} == {"a" * 56, "b" * 56} and pool.claim() is None  # c lacks CPUs, d is dead
    pool.release(first, lost=False)
    assert pool.claim() == first
    pool.release(second, lost=True)  # its cell died with the node, even if the cluster still lists it
    pool.release(first, lost=False)
    assert pool.claim() == first and pool.claim() is None
    cluster[0] = _node("a", alive=False, CPU=2.0)
    pool.release(first, lost=False)  # the cluster says it died
    assert pool.claim() is None and "lost during this sweep: aaaaaaaaaaaa, bbbbbbbbbbbb" in pool.describe_lost()


def test_a_request_no_node_can_meet_is_refused_with_what_the_nodes_have():
    nodes = [{"NodeID": "a" * 56, "Resources": {"CPU": 96.0, "GPU": 8.0}}]
    check_feasible({"GPU": 8.0}, nodes, "auto")
    with pytest.raises(ConfigError, match=r"ray_address: invalid value 'auto'; allowed: a Ray cluster with a node "
                                          r"that has HPU 8 \(nodes here: aaaaaaaaaaaa: CPU 96, GPU 8\)$"):
        check_feasible({"HPU": 8.0}, nodes, "auto")


def test_ray_addresses(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert parse_ray_address("auto") == ("auto", None)
    assert parse_ray_address("ray://head:10001") == ("ray://head:10001", ("head", 10001))
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert parse_ray_address("auto") == ("10.0.0.1:6379", ("10.0.0.1", 6379))
    with pytest.raises(ConfigError, match="ray_address: invalid value 'head'; allowed: auto, host:port"):
        parse_ray_address("head")


def test_ray_cells_upload_their_checkpoints_unless_the_user_said_otherwise():
    """A Ray cell's folder lives as long as its task: its checkpoints go to the tracking server too."""
    from bridgetower_mlflow.sweep.backends.ray.task import with_checkpoint_upload

    assert with_checkpoint_upload(["--save-steps", "10"]) == ["--save-steps", "10", "--checkpoint-upload", "true"]
    assert with_checkpoint_upload(["--checkpoint-upload", "false"]) == ["--checkpoint-upload", "false"]
    assert with_checkpoint_upload(["--checkpoint_upload=false"]) == ["--checkpoint_upload=false"]
