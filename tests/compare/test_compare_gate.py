"""The regression gate through compare's click command: write, pass, fail 10 % below, tolerance, errors."""

import json

import pytest
from click.testing import CliRunner

from bridgetower_mlflow.compare.command import compare_command

from tests.fakes.synthetic_runs import STUDY_RUNS, TrainRunSpec, log_study_runs, log_train_run


def _log_study_set(client, experiment_id, factor=1.0, only=None):
    for accel, workers, decode, value in STUDY_RUNS:
        slower = only is None or (accel, workers, decode) == only
        log_train_run(client, experiment_id, TrainRunSpec(accel, value * (factor if slower else 1.0), workers, decode))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from mlflow import MlflowClient

    root = tmp_path_factory.mktemp("gate")
    uri = f"sqlite:///{root}/mlflow.db"
    client = MlflowClient(uri)
    experiments = {name: client.create_experiment(name, artifact_location=str(root / "artifacts"))
                   for name in ("base", "slower", "one-slower", "cpu-only")}
    log_study_runs(client, experiments["base"])
    _log_study_set(client, experiments["slower"], 0.9)
    _log_study_set(client, experiments["one-slower"], 0.9, only=("h100", 2, False))
    log_train_run(client, experiments["cpu-only"], TrainRunSpec("cpu", 2.0, devices=1, batch=8))
    gate = root / "gates" / "study-gate.json"
    result = CliRunner().invoke(compare_command, ["--experiment-name", "base", "--reference", "study",
                                                  "--write-gate", str(gate)], env={"MLFLOW_TRACKING_URI": uri})
    assert result.exit_code == 0, result.output
    return client, uri, gate, result


@pytest.fixture
def compare(store, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store[1])
    return lambda *args: CliRunner().invoke(compare_command, list(args))


def test_written_gate_holds_measured_medians_only_and_is_logged(store):
    client, _, gate, result = store
    document = json.loads(gate.read_text())
    assert document["format"] == "bridgetower-mlflow compare gate" and document["aggregate"] == "median"
    values = sorted(entry["samples_per_second"] for entry in document["entries"])
    assert values == sorted(value for *_, value in STUDY_RUNS)  # 10 measured cells, no published row
    key = document["entries"][0]["key"]
    assert {"accelerator", "dataloader_num_workers", "decode", "throughput_warmup_steps", "model",
            "per_device_train_batch_size", "devices"} <= set(key)
    assert f"wrote gate {gate}" in result.output
    run_id = result.output.split("logged compare outputs on run ")[1].split()[0]
    assert "compare/gate.json" in {a.path for a in client.list_artifacts(run_id, "compare")}
    assert client.get_run(run_id).data.tags["compare.write_gate"] == str(gate)


def test_the_same_runs_pass_their_own_gate(store, compare):
    result = compare("--experiment-name", "base", "--no-log", "--gate", str(store[2]))
    assert result.exit_code == 0, result.output
    assert "passed; 10 checked, 0 in the gate but not here" in result.output


def test_a_gate_written_before_a_configuration_key_existed_still_checks_its_cells(store, compare, tmp_path):
    """Gate files outlive releases: a key the gate lacks (hf_args came later) is the key's empty value."""
    document = json.loads(store[2].read_text())
    for entry in document["entries"]:
        del entry["key"]["hf_args"]
    older = tmp_path / "older-gate.json"
    older.write_text(json.dumps(document))
    result = compare("--experiment-name", "slower", "--no-log", "--gate", str(older))
    assert result.exit_code == 1 and "FAILED, 10 below; 10 checked, 0 in the gate but not here" in result.output
    assert "None" not in result.output, result.output


def test_a_set_ten_percent_slower_fails_and_lists_every_configuration(store, compare):
    result = compare("--experiment-name", "slower", "--gate", str(store[2]), "--tolerance", "0.95")
    assert result.exit_code == 1
    below = [line for line in result.stdout.splitlines() if line.strip().startswith("BELOW")]
    assert len(below) == 20  # in the report's notes and again at the end of the log
    assert all("(-10.0% vs gate)" in line for line in below)
    assert any(line.strip().startswith("BELOW h100 w2 decode=cpu |") and "541.9 samples/s" in line for line in below)
    assert result.stderr.strip() == f"error: gate: 10 of 10 configurations below 0.95 x {store[2]}"
    client = store[0]
    slower = client.get_experiment_by_name("slower").experiment_id
    (run,) = client.search_runs([slower], "tags.`bridgetower.run_kind` = 'compare'")
    assert run.data.tags["compare.gate_result"].startswith(f"Gate {store[2]} (tolerance 0.95")
    assert "FAILED, 10 below" in run.data.tags["compare.gate_result"]


def test_tolerance_is_the_rule(store, compare):
    assert compare("--experiment-name", "slower", "--no-log", "--gate", str(store[2]),
                   "--tolerance", "0.85").exit_code == 0
    assert compare("--experiment-name", "slower", "--no-log", "--gate", str(store[2]),
                   "--tolerance", "0.91").exit_code == 1


def test_only_the_regressed_configuration_is_listed(store, compare):
    result = compare("--experiment-name", "one-slower", "--no-log", "--gate", str(store[2]))
    assert result.exit_code == 1
    tail = result.stdout.strip().splitlines()[-1]
    assert tail.strip().startswith("BELOW h100 w2 decode=cpu |")
    assert result.stderr.strip().startswith("error: gate: 1 of 10 configurations below 0.95 x")


@pytest.mark.parametrize("content, option, expected", [
    (None, [], "error: gate: invalid value"),
    ("not json", [], "(this one is not JSON)"),
    ('{"entries": []}', [], "(format 'bridgetower-mlflow compare gate'"),
    ("GATE", ["--tolerance", "abc"], "error: tolerance: invalid value 'abc'; allowed: a number > 0"),
    ("GATE", ["--tolerance", "0"], "error: tolerance: invalid value '0'"),
])
def test_bad_gate_input_is_one_line_exit_2(store, compare, tmp_path, content, option, expected):
    path = store[2] if content == "GATE" else tmp_path / "gate.json"
    if content not in (None, "GATE"):
        path.write_text(content)
    result = compare("--experiment-name", "base", "--no-log", "--gate", str(path), *option)
    assert result.exit_code == 2
    assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_gate_of_other_configurations_checks_nothing_and_says_so(store, compare):
    result = compare("--experiment-name", "cpu-only", "--no-log", "--gate", str(store[2]))
    assert result.exit_code == 2
    assert "none of its 10 is here" in result.stderr
