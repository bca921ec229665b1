"""A full disk is one line wherever train writes: what, where, needed and free, what to do; exit status 1.

On a real small filesystem (a tmpfs: root may mount one) and, where a real one cannot say it (a quota, a
read-only file system, a platform without mounts), with the errno injected at the same call."""

from __future__ import annotations

import errno
import json
import os
from types import SimpleNamespace

import pytest

from bridgetower_mlflow.config import build_train_config
from bridgetower_mlflow.disk_space import disk_errno, ensure_room, full_line, writing
from bridgetower_mlflow.errors import DiskFull, OutputUnwritable
from bridgetower_mlflow.train.checkpoints.output_folder import check_writable, holding, writes_into
from bridgetower_mlflow.train.checkpoints.resume import last_run, remember_run

from tests.support.small_disk import fill, small_disks


@pytest.fixture
def disks(tmp_path):
    with small_disks(tmp_path) as make:
        yield make


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and isinstance(exc, DiskFull) and exc.exit_code == 1
    return text


def test_torch_and_safetensors_writes_cut_by_a_real_full_disk_become_one_line(disks):
    import torch
    from safetensors.torch import save_file

    out = disks(1)
    run = out / "run1"
    (run / "checkpoint-4").mkdir(parents=True)
    tensors = {"weight": torch.zeros(400_000)}  # 1.6 MB: more than the disk holds
    for write in (lambda: torch.save(tensors, run / "checkpoint-4" / "optimizer.pt"),
                  lambda: save_file(tensors, str(run / "checkpoint-4" / "model.safetensors"))):
        with pytest.raises(DiskFull) as refused:
            with writes_into(str(out)):
                write()
        line = _one_line(refused.value)
        assert line.startswith(f"output_dir: no space left on device for checkpoint-4 (left incomplete: the next "
                               f"resume removes it) in '{run}' (")
        assert " MB free); free space there or set save_total_limit" in line
        for leftover in (run / "checkpoint-4").iterdir():
            leftover.unlink()


def test_other_failures_keep_their_own_type_inside_the_output_folder(tmp_path):
    with pytest.raises(RuntimeError, match="shape mismatch"):
        with writes_into(str(tmp_path)):
            raise RuntimeError("shape mismatch")
    with pytest.raises(RuntimeError, match="unexpected pos"):  # torch's short write, but the disk has room
        with writes_into(str(tmp_path)):
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")
    with pytest.raises(OutputUnwritable):
        with writes_into(str(tmp_path)):
            raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "run" / "final-model"))


@pytest.mark.parametrize("code, reason, advice", [
    (errno.EDQUOT, "disk quota exceeded", "free space there"),
    (errno.EROFS, "read-only file system", "make it writable or choose another output"),
])
def test_a_quota_and_a_read_only_file_system_say_so(tmp_path, code, reason, advice):
    with pytest.raises(DiskFull) as refused:  # injected: neither can be made without privileges tmpfs lacks
        with writing("output", "the comparison table", tmp_path):
            raise OSError(code, os.strerror(code), str(tmp_path / "speedups.csv"))
    line = _one_line(refused.value)
    assert line.startswith(f"output: {reason} for the comparison table in '{tmp_path}' (")
    assert line.endswith(f"; {advice}")
    with pytest.raises(FileNotFoundError):  # not a disk problem: unchanged
        with writing("output", "the comparison table", tmp_path):
            open(tmp_path / "missing" / "x")


def test_the_errno_is_found_in_what_libraries_say():
    assert disk_errno(RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)")) \
        == errno.ENOSPC
    assert disk_errno(OSError(errno.EROFS, "Read-only file system")) == errno.EROFS
    assert disk_errno(RuntimeError("unexpected pos 1 vs 2")) is None  # no folder to look at: not assumed
    assert disk_errno(ValueError("bad")) is None


def test_room_is_checked_before_anything_is_written(disks):
    out = disks(1)
    with pytest.raises(DiskFull) as refused:
        ensure_room("output_dir", "checkpoint-8", out / "run", 6_300_000, why="the size of checkpoint-4")
    line = _one_line(refused.value)
    assert line.startswith(f"output_dir: not enough free space for checkpoint-8 in '{out / 'run'}' (needs 6.3 MB: "
                           "the size of checkpoint-4; 1.0 MB free); free space there")
    assert list(out.iterdir()) == []
    ensure_room("output_dir", "checkpoint-8", out, 500_000)  # fits: no error
    assert full_line("output_dir", "x", out, code=None).startswith("output_dir: not enough free space for x in")


def test_a_full_output_folder_at_start_is_one_line(disks):
    out = disks(1)
    fill(out)
    with pytest.raises(DiskFull) as refused:
        check_writable(str(out))
    assert _one_line(refused.value).startswith(f"output_dir: no space left on device for a first file in '{out}' "
                                               "(0.0 MB free); free space there or choose another output_dir")
    with pytest.raises(DiskFull, match=r"^output_dir: no space left on device for its lock file"):
        with holding(str(out)):
            pass


def test_last_run_json_is_whole_or_the_earlier_one(disks):
    out = disks(1)
    remember_run(str(out), "a" * 32)
    fill(out)
    with pytest.raises(OSError) as refused:  # open_run turns it into the line (writes_into)
        remember_run(str(out), "b" * 32)
    assert refused.value.errno == errno.ENOSPC
    assert last_run(str(out)) == "a" * 32 and json.loads((out / "last_run.json").read_text())
    with pytest.raises(DiskFull, match=r"^output_dir: no space left on device for a file in"):
        with writes_into(str(out)):
            remember_run(str(out), "b" * 32)


def test_a_marker_that_does_not_fit_is_one_line_and_leaves_the_checkpoint_unmarked(disks):
    from bridgetower_mlflow.telemetry.sinks import NullSink
    from bridgetower_mlflow.train.checkpoints.callbacks import checkpoint_callbacks
    from bridgetower_mlflow.train.checkpoints.wholeness import MARKER, is_whole

    out = disks(1)
    folder = out / "run" / "checkpoint-2"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text('{"global_step": 2}')
    fill(out)
    (callback,) = checkpoint_callbacks(build_train_config(), NullSink())
    args = SimpleNamespace(output_dir=str(out / "run"), should_save=True)
    with pytest.raises(DiskFull, match=r"^output_dir: no space left on device for checkpoint-2's completion marker"):
        callback.on_save(args, SimpleNamespace(global_step=2), SimpleNamespace())
    assert not (folder / MARKER).exists() and not is_whole(folder)
