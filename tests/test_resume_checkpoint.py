"""Which checkpoint a resume continues from, when a SIGKILL cut the last save short."""

import json
import logging
from types import SimpleNamespace

import pytest

from bridgetower_mlflow.errors import ConfigError
from bridgetower_mlflow.train.resume import checkpoint_to_resume

RESUME = SimpleNamespace(resume=True)


def _checkpoint(folder, step, state="complete"):
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"weights")  # Trainer writes the model first, its state last
    if state == "complete":
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    elif state == "truncated":
        (path / "trainer_state.json").write_text('{"global_st')
    return path


def test_a_resume_skips_checkpoints_whose_save_was_cut_short(tmp_path, caplog):
    complete = _checkpoint(tmp_path, 10)
    _checkpoint(tmp_path, 9)
    _checkpoint(tmp_path, 20, state="no state")  # killed before the Trainer wrote its state
    _checkpoint(tmp_path, 30, state="truncated")  # killed while writing it
    with caplog.at_level(logging.WARNING):
        assert checkpoint_to_resume(RESUME, str(tmp_path)) == str(complete)
    assert "checkpoint-30, checkpoint-20 incomplete (a save cut short); resuming from checkpoint-10" in caplog.text


def test_a_complete_latest_checkpoint_is_taken_without_a_warning(tmp_path, caplog):
    _checkpoint(tmp_path, 10)
    latest = _checkpoint(tmp_path, 100)
    assert checkpoint_to_resume(RESUME, str(tmp_path)) == str(latest)  # 100 > 10 by number, not by name
    assert checkpoint_to_resume(SimpleNamespace(resume=False), str(tmp_path)) is None
    assert caplog.text == ""


def test_no_complete_checkpoint_is_refused_naming_the_field(tmp_path):
    _checkpoint(tmp_path, 10, state="no state")
    with pytest.raises(ConfigError) as refused:
        checkpoint_to_resume(RESUME, str(tmp_path))
    assert str(refused.value).startswith("resume: invalid value 'true'; allowed only with a complete checkpoint in")
