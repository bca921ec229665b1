"""The output folder: checked before a run starts, write failures inside it become one `output_dir:` line."""

from __future__ import annotations

import os

import pytest

from bridgetower_mlflow.errors import OutputUnwritable
from bridgetower_mlflow.train.checkpoints.output_folder import check_writable, writes_into


def test_a_folder_that_cannot_exist_is_refused_before_the_run(tmp_path):
    check_writable(str(tmp_path / "new" / "outputs"))  # created
    assert (tmp_path / "new" / "outputs").is_dir() and not list((tmp_path / "new" / "outputs").iterdir())
    with pytest.raises(OutputUnwritable, match=r"^output_dir: cannot write into '/dev/null/out' \(Not a directory"):
        check_writable("/dev/null/out")


def test_write_failures_inside_the_folder_become_one_line_and_others_pass(tmp_path):
    (tmp_path / "checkpoint-2").write_text("a file")
    with pytest.raises(OutputUnwritable, match=r"File exists at .*checkpoint-2\)"):
        with writes_into(str(tmp_path)):
            os.makedirs(tmp_path / "checkpoint-2", exist_ok=True)  # what Trainer._save_checkpoint does
    with pytest.raises(OutputUnwritable, match="PytorchStreamWriter failed"):
        with writes_into(str(tmp_path)):
            raise RuntimeError(f"[enforce fail] PytorchStreamWriter failed writing file {tmp_path}/model.pt")
    with pytest.raises(FileNotFoundError):  # a dataset file is not the output folder's business
        with writes_into(str(tmp_path)):
            open(tmp_path.parent / "missing-dataset-file.jpg")
    with pytest.raises(RuntimeError, match="shape mismatch"):
        with writes_into(str(tmp_path)):
            raise RuntimeError("shape mismatch")
