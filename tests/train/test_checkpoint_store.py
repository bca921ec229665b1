"""The uploader and the server side of a resume on a real store (sqlite + a local artifact folder): the latest
whole checkpoint kept and older ones deleted, the marker last, downloads whole or not at all."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from bridgetower_mlflow.errors import DiskFull
from bridgetower_mlflow.train.checkpoints.remote import download, list_remote
from bridgetower_mlflow.train.checkpoints.upload import CheckpointUploader
from bridgetower_mlflow.train.checkpoints.wholeness import MARKER, is_whole, write_marker


def _checkpoint(folder, step, size=2000):
    path = folder / f"checkpoint-{step}"
    (path / "nested").mkdir(parents=True)
    (path / "model.safetensors").write_bytes(bytes([step % 256]) * size)
    (path / "nested" / "rng_state.pth").write_bytes(b"rng")
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    write_marker(path, step)
    return path


@pytest.fixture
def run(sqlite_uri, tmp_path):
    client = MlflowClient(sqlite_uri)
    experiment = client.create_experiment("store", artifact_location=str(tmp_path / "artifacts"))
    return client, client.create_run(experiment).info.run_id


def test_the_latest_whole_checkpoint_is_kept_and_older_ones_deleted(run, tmp_path):
    client, run_id = run
    uploader = CheckpointUploader(client, run_id, tmp_path / "out")
    uploader.submit(_checkpoint(tmp_path / "out", 2))
    assert uploader.wait(120)
    assert list_remote(client, run_id).whole == ("checkpoints/checkpoint-2",)
    uploader.submit(_checkpoint(tmp_path / "out", 4))
    assert uploader.wait(120) and uploader.uploaded == "checkpoints/checkpoint-4"
    listed = list_remote(client, run_id)
    assert (listed.whole, listed.cut, listed.latest_step) == (("checkpoints/checkpoint-4",), (), 4)
    uploaded = tmp_path / "artifacts" / run_id / "artifacts" / "checkpoints" / "checkpoint-4"
    assert sorted(str(p.relative_to(uploaded)) for p in uploaded.rglob("*") if p.is_file()) == \
        [MARKER, "model.safetensors", "nested/rng_state.pth", "trainer_state.json"]
    assert not (tmp_path / "out" / ".checkpoint-staging" / "upload-checkpoint-4").exists()  # the snapshot is gone

    fresh = tmp_path / "elsewhere" / run_id
    got = download(client, run_id, "checkpoints/checkpoint-4", fresh)
    assert got == fresh / "checkpoint-4" and is_whole(got)
    assert (got / "model.safetensors").read_bytes() == (tmp_path / "out" / "checkpoint-4" / "model.safetensors"
                                                       ).read_bytes()


def test_a_cut_upload_is_listed_as_cut_and_a_short_download_is_refused(run, tmp_path):
    client, run_id = run
    local = _checkpoint(tmp_path / "out", 6)
    client.log_artifact(run_id, str(local / "model.safetensors"), "checkpoints/checkpoint-6")  # cut before the rest
    assert list_remote(client, run_id).cut == ("checkpoints/checkpoint-6",)
    client.log_artifact(run_id, str(local / MARKER), "checkpoints/checkpoint-6")  # a marker whose files are missing
    with pytest.raises(OSError, match="downloaded with files missing or cut short"):
        download(client, run_id, "checkpoints/checkpoint-6", tmp_path / "fresh")
    assert [p.name for p in (tmp_path / "fresh").rglob("*")] == [".checkpoint-staging"]


def test_a_download_that_cannot_fit_is_refused_before_it_starts(run, tmp_path):
    from tests.support.small_disk import small_disks

    client, run_id = run
    uploader = CheckpointUploader(client, run_id, tmp_path / "out")
    uploader.submit(_checkpoint(tmp_path / "out", 2, size=3_000_000))
    assert uploader.wait(120)
    with small_disks(tmp_path) as make:
        disk = make(1, "small")
        with pytest.raises(DiskFull, match=r"^output_dir: not enough free space for checkpoint-2 from the tracking "
                                           r"server in '.*' \(needs 3\.0 MB: the size its marker lists; "):
            download(client, run_id, "checkpoints/checkpoint-2", disk / run_id)
        assert [p.name for p in (disk / run_id).rglob("*")] == [".checkpoint-staging"]  # nothing else left
