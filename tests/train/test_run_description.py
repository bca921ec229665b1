"""The run's description (its MLflow note) names the conditions a run ran under, its extra flags included."""

from types import SimpleNamespace

from bridgetower_mlflow.config import build_train_config
from bridgetower_mlflow.train.record import describe


def _prepared():
    return SimpleNamespace(device=SimpleNamespace(kind="cpu", device_name="Xeon", count=1), data_loader="torch-cpu",
                           recipe=SimpleNamespace(precision="fp32"))


def test_the_description_names_the_extra_trainingarguments_flags_where_there_are_some():
    flagged = describe(build_train_config(hf_args="--dataloader_persistent_workers true"), _prepared(), {}, "no")
    first = flagged.splitlines()[0]
    assert first.startswith("**cpu** (Xeon) x1 · model `tiny` · batch") and first.endswith(
        " · hf_args `--dataloader_persistent_workers true`")
    plain = describe(build_train_config(), _prepared(), {}, "no")
    assert "hf_args" not in plain and plain.splitlines()[0].endswith("· fp32")
