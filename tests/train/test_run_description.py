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


def test_a_derived_run_name_fits_the_stores_run_name_column(tmp_path):
    """A local checkpoint's path can be 4096 bytes; PostgreSQL and MySQL refuse a run name over 250 characters."""
    from bridgetower_mlflow.contract import RUN_NAME_LIMIT
    from bridgetower_mlflow.train.record import run_name

    deep = tmp_path
    for _ in range(3):
        deep = deep / ("checkpoint-" + "x" * 120)
    deep.mkdir(parents=True)
    name = run_name(build_train_config(model=str(deep), dataloader_num_workers=2), "cpu")
    assert len(name) <= RUN_NAME_LIMIT
    assert name.startswith("cpu ") and name.endswith(" w2 decode=cpu") and "checkpoint-" in name
    assert run_name(build_train_config(dataloader_num_workers=0), "cpu") == "cpu tiny w0 decode=cpu"
