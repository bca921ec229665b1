"""Shared fixtures: an isolated cache, temporary sqlite stores, a real `mlflow server` process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bridgetower_mlflow.tracking.store_init import sqlite_file

from tests.support.empty_store import empty_store

pytest_plugins = ["tests.support.cpu_report"]  # the CPU-costliest tests, beside the slowest
# Test files run side by side on shared cores, as torchrun's ranks do: one torch thread per process unless the
# shell says otherwise (the product keeps a user's OMP_NUM_THREADS). Two threads a training on two shared cores
# wait on each other: a tiny run then costs 2.5-5x the CPU. The tests of the unset default unset it themselves.
os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ARTIFACTS = REPO / "test-artifacts"
# Nothing a test runs inherits a run, a tracking URI, credentials or retry settings from the shell:
# MLflow's own defaults (7 retries, 120 s a request) are what users have, and what the tests run under.
_MLFLOW_ENV = ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_TRACKING_URI",
               "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN",
               "MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT", "PT_HPU_LAZY_MODE",
               "RANK", "WORLD_SIZE", "LOCAL_RANK")


# The files that take longest go to the workers first (`make test` passes --no-loadscope-reorder, so xdist hands
# files out in collection order, and gives a worker its next file while the last two tests of its current one run):
# one started near the end would hold the whole run. Measured in a fresh-clone CI (wall, then CPU), longest first.
LONGEST_FIRST = (
    "tests/accelerators/test_gaudi_stack.py", "tests/truth/test_truth_gaudi.py",  # the Gaudi stack's longest
    "tests/sweep/test_sweep_ray.py", "tests/project/test_device_check.py", "tests/tracking/test_reliability.py",
    "tests/architecture/test_benchmarks_smoke.py", "tests/cli/test_bad_input.py",
    "tests/tracking/test_postgres_flow.py", "tests/config/test_secrets.py", "tests/compare/test_compare_real.py",
    "tests/launch/test_multi_device.py", "tests/truth/test_truth.py", "tests/train/test_checkpoint_upload.py",
    "tests/train/test_disk_full.py", "tests/sweep/test_sweep.py", "tests/tracking/test_concurrent_trains.py",
    "tests/train/test_interrupts.py", "tests/project/test_project_entry_points.py", "tests/tracking/test_ui.py",
    "tests/cli/test_one_line_errors.py", "tests/tracking/test_spill_torn.py", "tests/telemetry/test_phases_e2e.py",
    "tests/train/test_train_project.py", "tests/sweep/test_sweep_e2e.py", "tests/cli/test_fuzz_fields.py",
    "tests/train/test_logged_model_metrics.py", "tests/promote/test_promote_project.py",
    "tests/tracking/test_auth.py", "tests/truth/test_phase_truth.py", "tests/train/test_time_to_quality.py",
    "tests/train/test_resume_project.py", "tests/train/test_resume_loaders.py", "tests/architecture/test_layout.py",
    "tests/data/test_small_images.py", "tests/train/test_small_splits.py",
)


def pytest_collection_modifyitems(items):
    rank = {path: place for place, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest as collected


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """One sample set and tokenizer per test session (generated once, like a user's cache)."""
    folder = Path(os.environ.get("BRIDGETOWER_TEST_CACHE") or tmp_path_factory.mktemp("cache"))
    from bridgetower_mlflow.data.sample import generate_sample_set

    os.environ["BRIDGETOWER_MLFLOW_CACHE"] = str(folder)
    generate_sample_set()
    return folder


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    """No test inherits a run, a tracking URI or credentials from the shell (or another test)."""
    for name in _MLFLOW_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    saved = {k: v for k, v in os.environ.items() if k.startswith("ACCELERATE_")}
    yield
    # what accelerate's settings wrote into os.environ stays with its test (TrainingArguments exports
    # ACCELERATE_DYNAMO_BACKEND, which every later Trainer and subprocess would compile with)
    for key in [k for k in os.environ if k.startswith("ACCELERATE_")]:
        del os.environ[key]
    os.environ.update(saved)
    # a URI a test gave MLflow's fluent API outlives the environment: the next test in the worker would reach a
    # server that is gone (the fresh-clone CI's sweep e2e after test_logged_model_metrics, port 33059 refused)
    if "mlflow" in sys.modules:
        sys.modules["mlflow"].set_tracking_uri(None)


@pytest.fixture
def sqlite_uri(tmp_path, monkeypatch) -> str:
    uri = empty_store(tmp_path / "mlflow.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    import mlflow

    mlflow.set_tracking_uri(uri)
    yield uri
    mlflow.set_tracking_uri(None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, timeout: float = 180.0, process=None) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(url)


class MlflowServer:
    """A real `mlflow server` subprocess over a given backend store; can be stopped and restarted."""

    def __init__(self, backend_uri: str, artifacts: Path, port: int | None = None, extra=(), env=None):
        self.backend_uri, self.artifacts, self.port = backend_uri, artifacts, port or free_port()
        self.extra, self.env, self.process = list(extra), env, None
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> MlflowServer:
        database = sqlite_file(self.backend_uri)
        if database is not None and not database.exists():
            empty_store(database)
        command = [str(BIN / "mlflow"), "server", "--backend-store-uri", self.backend_uri,
                   "--artifacts-destination", str(self.artifacts), "--host", "127.0.0.1",
                   "--port", str(self.port), "--workers", "1", *self.extra]
        log = open(self.artifacts.parent / f"server-{self.port}.log", "a")
        # MLflow's job runner (seven huey consumers) serves GenAI jobs these tests never use; on a
        # two-core machine it doubles the server's start-up time.
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", **(self.env or {})}
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)
        wait_http(self.url + "/health", process=self.process)
        return self

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, 9)
            self.process.wait(timeout=30)


@pytest.fixture
def mlflow_server(tmp_path, monkeypatch):
    """A real tracking server (sqlite backend, proxied artifacts) for this test."""
    server = MlflowServer(f"sqlite:///{tmp_path / 'server.db'}", tmp_path / "server-artifacts").start()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.url)
    yield server
    server.stop()


def run_cli(args, env_extra=None, timeout=600, cwd=None) -> subprocess.CompletedProcess:
    """`bridgetower-mlflow ...` as a real subprocess with the test's environment."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", **(env_extra or {})}
    return subprocess.run([str(BIN / "bridgetower-mlflow"), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def mlflow_run(params: dict, experiment: str, env_extra=None, entry="train", timeout=900):
    """`mlflow run <repo> -e <entry> -P k=v ... --env-manager local` as a real subprocess.

    A train without output_dir trains into the test's own folder: the default (`outputs` in the project, where
    `mlflow run` starts) is held by one train at a time, and the suite runs test files side by side."""
    if entry == "train" and "output_dir" not in params:
        params = {**params, "output_dir": str(Path.cwd() / "outputs")}  # cwd: the test's tmp_path
    args = [str(BIN / "mlflow"), "run", str(REPO), "-e", entry, "--env-manager", "local",
            "--experiment-name", experiment]
    for key, value in params.items():
        args += ["-P", f"{key}={value}"]
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", **(env_extra or {})}
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)


def never_opened(uri: str) -> bool:
    """A sqlite store whose file no process made: it holds no run. Asking MLflow would make and migrate one (2 s)."""
    database = sqlite_file(uri)
    return database is not None and not database.exists()


def no_running_runs(uri: str) -> list:
    """Runs left RUNNING in any experiment (must be empty after every failure)."""
    if never_opened(uri):
        return []
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    ids = [e.experiment_id for e in client.search_experiments()]
    return [r.info.run_id for r in client.search_runs(ids, "attributes.status = 'RUNNING'")] if ids else []


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL 15 cluster for the session (started with initdb/pg_ctl on loopback)."""
    from tests.support.pg_cluster import PostgresCluster

    cluster = PostgresCluster(free_port()).start()
    yield cluster
    cluster.stop()


AUTH_ADMIN = {"MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": "admin-Pw-7731-secret"}


@pytest.fixture
def basic_auth_server(tmp_path, monkeypatch):
    """`mlflow server --app-name basic-auth` with a fresh user store; the admin's password is AUTH_ADMIN's."""
    config = tmp_path / "basic_auth.ini"
    config.write_text("[mlflow]\ndefault_permission = READ\n"
                      f"database_uri = sqlite:///{tmp_path / 'basic_auth.db'}\nadmin_username = admin\n"
                      "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
                      "auth_cache_ttl_seconds = 600\n")
    env = {"MLFLOW_FLASK_SERVER_SECRET_KEY": "flask-key-for-tests", "MLFLOW_AUTH_CONFIG_PATH": str(config),
           "MLFLOW_AUTH_ADMIN_PASSWORD": AUTH_ADMIN["MLFLOW_TRACKING_PASSWORD"]}
    server = MlflowServer(f"sqlite:///{tmp_path / 'server.db'}", tmp_path / "server-artifacts",
                          extra=["--app-name", "basic-auth"], env=env).start()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.url)
    yield server
    server.stop()
