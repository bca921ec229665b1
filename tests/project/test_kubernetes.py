"""deploy/kubernetes: each job template rendered with MLflow's own Kubernetes-backend code, exactly as
`mlflow run -b kubernetes` renders it (minus docker build/push and the API call), then validated against the
Kubernetes schema (kubernetes-validate, strict), offline.
"""

from __future__ import annotations

import copy
import json
import re
import socket

import pytest
import yaml

from tests.conftest import REPO

DEPLOY = REPO / "deploy" / "kubernetes"
K8S_VERSION = "1.33.0"  # a version kubernetes-validate ships a schema for
TRACKING_URI = "https://mlflow.example.com"
SECRET = "bridgetower-mlflow-tracking"
CREDENTIALS = {"MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN"}
DIGEST = "sha256:" + "0123456789abcdef" * 4
APPENDED = {"MLFLOW_RUN_ID", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID"}  # what MLflow adds inline

kubernetes_backend = pytest.importorskip("mlflow.projects.kubernetes", reason="needs the kubernetes package")
kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="needs kubernetes-validate")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """Any connection or DNS lookup fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args[:2]}")

    for name in ("connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture(autouse=True)
def submitter(monkeypatch):
    """The submitting shell: its tracking URI, run from the repository root (backend configs use its paths)."""
    import mlflow

    monkeypatch.delenv("KUBE_MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(REPO)
    mlflow.set_tracking_uri(TRACKING_URI)
    yield
    mlflow.set_tracking_uri(None)


def render(cluster: str, entry: str = "train", parameters: dict | None = None) -> dict:
    """The Job `mlflow run deploy/kubernetes -b kubernetes --backend-config ...-<cluster>.json` would submit."""
    from mlflow.projects import _parse_kubernetes_config
    from mlflow.projects._project_spec import load_project
    from mlflow.projects.utils import get_entry_point_command, get_run_env_vars

    config = _parse_kubernetes_config(json.loads((DEPLOY / f"backend-config-{cluster}.json").read_text()))
    project = load_project(str(DEPLOY))
    accel = "gaudi2" if cluster == "gaudi" else "h100"
    command = get_entry_point_command(project, entry, {"accel": accel, **(parameters or {})}, None)  # as -b kubernetes
    env = get_run_env_vars(run_id="0" * 32, experiment_id="7")
    return kubernetes_backend._get_kubernetes_job_definition(  # MLflow mutates its template: give it a copy
        project.name, config["repository-uri"] + ":abc1234", DIGEST, kubernetes_backend._get_run_command(command),
        env, copy.deepcopy(config["kube-job-template"]))


def container(job: dict) -> dict:
    return job["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("entry", ["train", "sweep"])
@pytest.mark.parametrize("cluster", ["gaudi", "nvidia"])
def test_rendered_job_is_a_valid_kubernetes_job(cluster, entry):
    job = render(cluster, entry)
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)  # raises ValidationError
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", job["metadata"]["name"])
    assert len(job["metadata"]["name"]) <= 63  # it becomes the pods' job-name label
    repository = json.loads((DEPLOY / f"backend-config-{cluster}.json").read_text())["repository-uri"]
    assert container(job)["image"] == f"{repository}:abc1234@{DIGEST}"
    command = container(job)["command"]
    assert command[:4] == ["python", "-m", "bridgetower_mlflow", entry] and "--devices" in command
    # MLflow shell-quotes each argument and Kubernetes runs no shell: nothing may need quoting
    assert not [arg for arg in command if "'" in arg or '"' in arg], command
    assert "{replaced" not in json.dumps(job)


def test_gaudi_job_has_what_the_gaudi_device_plugin_documents():
    job = render("gaudi")
    assert job["spec"]["template"]["spec"]["hostIPC"] is True
    assert "SYS_NICE" in container(job)["securityContext"]["capabilities"]["add"]
    limits = container(job)["resources"]["limits"]
    assert limits["habana.ai/gaudi"] == 8 and "hugepages-2Mi" in limits
    assert container(job)["command"][container(job)["command"].index("--accel") + 1] == "gaudi2"


def test_nvidia_job_asks_for_eight_gpus():
    job = render("nvidia")
    assert container(job)["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert "hostIPC" not in job["spec"]["template"]["spec"]


@pytest.mark.parametrize("cluster", ["gaudi", "nvidia"])
def test_credentials_come_only_from_the_secret(cluster):
    env = container(render(cluster))["env"]
    inline = {entry["name"]: entry["value"] for entry in env if "value" in entry}
    assert set(inline) == APPENDED  # nothing of ours is inline; MLflow's three always are
    assert not re.search(r"://[^/@]+@", inline["MLFLOW_TRACKING_URI"])  # no user:password@ in the URI
    from_secret = {entry["name"]: entry["valueFrom"]["secretKeyRef"] for entry in env if "valueFrom" in entry}
    assert CREDENTIALS < set(from_secret) and all(ref["name"] == SECRET for ref in from_secret.values())


@pytest.mark.parametrize("cluster", ["gaudi", "nvidia"])
def test_the_tracking_uri_comes_from_the_secret_through_kube_mlflow_tracking_uri(cluster, monkeypatch):
    monkeypatch.setenv("KUBE_MLFLOW_TRACKING_URI", "$(BRIDGETOWER_TRACKING_URI)")
    env = container(render(cluster))["env"]
    assert "$(BRIDGETOWER_TRACKING_URI)" in [e.get("value") for e in env if e["name"] == "MLFLOW_TRACKING_URI"]
    # Kubernetes expands $(NAME) from variables defined earlier in the same list (else leaves it as is)
    for index, entry in enumerate(env):
        for name in re.findall(r"\$\((\w+)\)", entry.get("value", "")):
            (source,) = [e for e in env[:index] if e["name"] == name]
            assert source["valueFrom"]["secretKeyRef"] == {"name": SECRET, "key": "MLFLOW_TRACKING_URI"}


def test_the_secret_example_is_valid_and_holds_the_keys_the_templates_read():
    secret = yaml.safe_load((DEPLOY / "secret-example.yaml").read_text())
    kubernetes_validate.validate(secret, K8S_VERSION, strict=True)
    for name in ("gaudi-job.yaml", "nvidia-job.yaml"):
        template = yaml.safe_load((DEPLOY / name).read_text())
        assert template["metadata"]["namespace"] == secret["metadata"]["namespace"]  # MLflow submits there
        refs = [e["valueFrom"]["secretKeyRef"] for e in template["spec"]["template"]["spec"]["containers"][0]["env"]]
        required = {ref["key"] for ref in refs if not ref.get("optional")}
        assert {ref["name"] for ref in refs} == {secret["metadata"]["name"]} and required <= set(secret["stringData"])


def test_the_validator_really_rejects_a_broken_job():
    job = render("gaudi")
    job["spec"]["template"]["spec"]["hostIPC"] = "yes"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    job = render("gaudi")
    container(job)["resourcez"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):  # strict: unknown fields are errors
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)


@pytest.mark.parametrize("entry", ["train", "sweep"])
def test_the_kubernetes_project_mirrors_the_main_project(entry):
    main = yaml.safe_load((REPO / "MLproject").read_text())["entry_points"][entry]
    kube = yaml.safe_load((DEPLOY / "MLproject").read_text())["entry_points"][entry]
    expected = {name: spec for name, spec in main["parameters"].items() if spec.get("default") != ""}
    assert list(kube["parameters"]) == list(expected)  # only the ones an empty value would break are left out
    for name, spec in kube["parameters"].items():
        if name == "accel":
            assert "default" not in spec  # required: the template decides the hardware
        elif name == "devices":  # eight devices a pod, typed as the main project types it (sweep: a list)
            assert spec == {**expected[name], "default": type(expected[name]["default"])(8)}
        elif name == "checkpoint_upload":
            assert spec == {**expected[name], "default": True}  # a rescheduled pod starts on an empty disk
        else:
            assert spec == expected[name], name
        assert f"--{name.replace('_', '-')} {{{name}}}" in kube["command"]
    assert kube["command"].startswith(f"python -m bridgetower_mlflow {entry} ")


def test_the_image_installs_the_project_on_a_chosen_base():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE$", dockerfile, re.M) and "FROM ${BASE_IMAGE}" in dockerfile
    assert 'pip install ".[${EXTRAS}]"' in dockerfile
    project = yaml.safe_load((DEPLOY / "MLproject").read_text())
    assert project["docker_env"]["image"] == "bridgetower-mlflow:0.1.0" and project["name"] == "bridgetower-mlflow"
