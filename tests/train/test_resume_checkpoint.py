"""Which checkpoint a resume continues from, when a kill or a full disk cut the last save short.

A checkpoint is whole only with its marker (written after all its files, listing them at their sizes); torn
ones are removed by the next start with one warning each; folders from before the marker keep the old rule
(trainer_state.json, Trainer's last file, whole), so an upgrade never costs a resume."""

import json
import logging
from types import SimpleNamespace

import pytest

from bridgetower_mlflow.errors import ConfigError
from bridgetower_mlflow.train.checkpoints.resume import checkpoint_to_resume
from bridgetower_mlflow.train.checkpoints.wholeness import MARKER, is_whole, latest_whole, write_marker

pytestmark = pytest.mark.gaudi_stack

RESUME = SimpleNamespace(resume=True)


def _checkpoint(folder, step, state="whole"):
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"weights" * 100)  # Trainer writes the model first, its state last
    if state in ("whole", "legacy", "cut after the marker"):
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    elif state == "truncated state":
        (path / "trainer_state.json").write_text('{"global_st')
    if state in ("whole", "cut after the marker"):
        write_marker(path, step)
    if state == "cut after the marker":  # a file shorter than the marker says: a copy or download cut short
        (path / "model.safetensors").write_bytes(b"weights")
    return path


def test_a_resume_takes_the_latest_whole_checkpoint_and_removes_torn_ones(tmp_path, caplog):
    whole = _checkpoint(tmp_path, 10)
    _checkpoint(tmp_path, 9)
    _checkpoint(tmp_path, 20, state="no state")  # killed before the Trainer wrote its state
    _checkpoint(tmp_path, 30, state="truncated state")  # killed while writing it
    _checkpoint(tmp_path, 40, state="legacy")  # all files there, but killed before the marker
    _checkpoint(tmp_path, 50, state="cut after the marker")
    with caplog.at_level(logging.WARNING):
        assert checkpoint_to_resume(RESUME, str(tmp_path)) == str(whole)
    removed = sorted(r.getMessage().split(":")[0] for r in caplog.records)
    assert removed == sorted(f"removing {tmp_path}/checkpoint-{step}" for step in (20, 30, 40, 50))
    assert all("an incomplete checkpoint (its save was cut short" in r.getMessage() for r in caplog.records)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-10", "checkpoint-9"]


def test_checkpoints_from_before_the_marker_keep_the_old_rule(tmp_path, caplog):
    _checkpoint(tmp_path, 10, state="legacy")
    latest = _checkpoint(tmp_path, 100, state="legacy")
    _checkpoint(tmp_path, 200, state="no state")
    assert checkpoint_to_resume(RESUME, str(tmp_path)) == str(latest)  # 100 > 10 by number, not by name
    assert checkpoint_to_resume(SimpleNamespace(resume=False), str(tmp_path)) is None
    assert "checkpoint-200" in caplog.text and not (tmp_path / "checkpoint-200").exists()


def test_the_marker_lists_every_file_at_its_size(tmp_path):
    path = _checkpoint(tmp_path, 4)
    listed = json.loads((path / MARKER).read_text())
    assert listed == {"global_step": 4, "files": {"model.safetensors": 700, "trainer_state.json": 18}}
    assert is_whole(path)
    (path / "trainer_state.json").unlink()
    assert not is_whole(path) and latest_whole(tmp_path) is None


def test_only_torn_checkpoints_say_so_and_none_at_all_says_that(tmp_path):
    _checkpoint(tmp_path / "torn", 4, state="no state")
    with pytest.raises(ConfigError) as refused:
        checkpoint_to_resume(RESUME, str(tmp_path / "torn"))
    assert str(refused.value) == (f"resume: invalid value 'true'; allowed only with a complete checkpoint; the "
                                  f"checkpoints found in '{tmp_path / 'torn'}' were incomplete (checkpoint-4: saves "
                                  "cut short)")
    assert "save_steps" not in str(refused.value)
    with pytest.raises(ConfigError, match=r"holds no checkpoint \(train with save_steps>0, or wait for the first "):
        checkpoint_to_resume(RESUME, str(tmp_path / "empty"))
