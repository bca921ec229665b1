"""The Gaudi media pipeline: the project's reader and pipe driven by the real habana_frameworks.mediapipe.

Only the native layer under the vendor's Python is faked (tests/fakes/habana_native: the pybind
modules and libmedia.so; tests/fakes/habana_bridge: the PyTorch bridge's natives), and the fake
device decodes for real, so the batches can be compared with what the CPU path computes.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import numpy as np
import pytest
import torch

# the media loader's Python runs in .venv-gaudi (make test-gaudi); in .venv it would break ray.init
pytest.importorskip("habana_frameworks.mediapipe", reason="habana-media-loader is installed in .venv-gaudi")

from bridgetower_mlflow.accelerators.gaudi import media_pipe as habana_media_pipe
from bridgetower_mlflow.accelerators.gaudi.adapter import GaudiAccelerator
from bridgetower_mlflow.data.device_decode.batch_plan import RankBatchPlan
from bridgetower_mlflow.data.device_decode.jpeg_files import cache_folder, write_once
from bridgetower_mlflow.errors import DeviceDecodeUnavailable

from tests.fakes import install_habana
from tests.fakes.data import make_jpeg_dataset, pil_reference
from tests.fakes.habana_native import install_media_natives, install_media_stack, purge_media_modules
from tests.fakes.requests import MEAN, STD, decode_request

pytestmark = pytest.mark.gaudi_stack


@pytest.fixture(autouse=True)
def fresh_media_loader():
    """Each test imports the vendor's Python afresh, over the natives it installed (or none)."""
    habana_media_pipe.media_pipe_classes.cache_clear()
    purge_media_modules()
    yield
    habana_media_pipe.media_pipe_classes.cache_clear()
    purge_media_modules()


@pytest.fixture
def hf_cache(monkeypatch, tmp_path):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    return tmp_path / "hf-cache"


def _stack(monkeypatch, **bridge):
    """The vendor's Python over fresh natives and bridge; the pipe classes made from it afresh too."""
    habana_media_pipe.media_pipe_classes.cache_clear()
    install_media_stack(monkeypatch, **bridge)


def _loader(dataset, kind="gaudi2", drop_last=True):
    request = decode_request(dataset, num_workers=2, kind=kind, drop_last=drop_last)
    return GaudiAccelerator(kind).device_decode_loader(request)


def _first_ids(batches) -> list[list[int]]:
    return [[int(row[0]) for row in batch["input_ids"]] for batch in batches]


def _native(name: str):
    return importlib.import_module(name)  # a fake native, importable once installed


def test_media_pipe_is_unavailable_without_the_loader_natives_or_bridge(monkeypatch, tmp_path):
    dataset = make_jpeg_dataset(tmp_path)
    install_media_natives(monkeypatch)  # natives, but no PyTorch bridge
    with pytest.raises(DeviceDecodeUnavailable, match=r"not importable \(No module named 'habana_frameworks.torch"):
        _loader(dataset)
    purge_media_modules()
    monkeypatch.undo()
    install_habana(monkeypatch)  # the bridge, but no media natives
    with pytest.raises(DeviceDecodeUnavailable, match=r"not importable \(No module named 'media_pipe_"):
        _loader(dataset)
    install_media_natives(monkeypatch, libmedia=False)  # the pybind modules without libmedia.so
    with pytest.raises(DeviceDecodeUnavailable, match=r"not importable \(libmedia.so: cannot open"):
        _loader(dataset)


def test_media_pipe_unavailable_reasons(monkeypatch, tmp_path, hf_cache):
    _stack(monkeypatch)
    with pytest.raises(DeviceDecodeUnavailable, match=r"JPEG only, and 5 of 5 images are not \(first: '.*img0.png'"):
        _loader(make_jpeg_dataset(tmp_path, fmt="PNG"))
    with pytest.raises(DeviceDecodeUnavailable, match=r"JPEG only, and 5 of 5 images are not \(first: row 0\)"):
        _loader(make_jpeg_dataset(tmp_path, fmt="PNG", in_memory=True))  # PNG bytes are refused, not re-encoded
    assert not hf_cache.exists()
    remote = make_jpeg_dataset(tmp_path).map(lambda row: {"image": {"bytes": None, "path": "https://x/0.jpg"}})
    with pytest.raises(DeviceDecodeUnavailable, match="row 0 of column 'image' has neither a readable local path"):
        _loader(remote)
    with pytest.raises(DeviceDecodeUnavailable, match="first-generation"):
        _loader(make_jpeg_dataset(tmp_path), kind="gaudi")  # what detection found decides, not the call order


# the vendor's iterator __del__ reads self.pipe, which its __init__ had not set when hpu.init() raised
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_media_pipe_start_failures_are_reported(monkeypatch, tmp_path):
    _stack(monkeypatch, count=0)  # hpu.init() finds no device
    with pytest.raises(DeviceDecodeUnavailable, match=r"failed to start: RuntimeError: synStatus=8 \[Device not found"):
        _loader(make_jpeg_dataset(tmp_path))
    _stack(monkeypatch)
    dataset = make_jpeg_dataset(tmp_path)
    largest = max(tmp_path.glob("*.jpeg"), key=lambda path: path.stat().st_size)
    largest.write_bytes(b"\xff\xd8\xff" + bytes(largest.stat().st_size))  # a JPEG header, then nothing decodable
    # the decoder is sized from the largest file at the pipe's first iter(), not when the iterator is built
    with pytest.raises(DeviceDecodeUnavailable, match="failed to start: RuntimeError: Media API decoderMemInit failed"):
        _loader(dataset)


def test_media_pipe_graph_reaches_the_natives_as_declared(monkeypatch, tmp_path):
    _stack(monkeypatch)
    dataset = make_jpeg_dataset(tmp_path)
    _loader(dataset)
    manager, types = _native("media_pipe_api").managers[-1], _native("media_pipe_types")
    places = manager.placeholders
    decoder = next(p for p in places.values() if p["kind"] == "decoder")
    assert (decoder["dims"], decoder["layout"], decoder["dtype"]) == ([16, 16, 3, 2], "WHCN", types.dType.UINT8)
    consts = [p["data"] for p in places.values() if p["kind"] == "const"]
    want_mean, want_inv_std = np.float32(MEAN) * 255, 1 / (np.float32(STD) * 255)
    assert [c.shape for c in consts] == [(2, 3, 1, 1)] * 2 and [c.dtype for c in consts] == [np.float32] * 2
    np.testing.assert_allclose(consts[0][:, :, 0, 0], [want_mean] * 2, rtol=1e-6)
    np.testing.assert_allclose(consts[1][:, :, 0, 0], [want_inv_std] * 2, rtol=1e-6)
    (cmn,) = manager.ops
    assert cmn["guid"] == "crop_mirror_norm" and cmn["dtype"] == types.dType.FLOAT32
    assert {k: cmn["params"][k] for k in ("crop_w", "crop_h", "crop_pos_x", "crop_pos_y", "mirror")} == \
        {"crop_w": 16, "crop_h": 16, "crop_pos_x": 0.5, "crop_pos_y": 0.5, "mirror": 0}
    assert manager.recipe.shapes[manager.outputs[0]] == [16, 16, 3, 2]
    settings = manager.decoder
    assert settings["crop_type"] == types.RandomCropType.CENTER_CROP and settings["resampling"] == 4  # BICUBIC
    assert (settings["width"], settings["height"], settings["planar"]) == (16, 16, True)
    assert settings["largest_file"] == str(max(tmp_path.glob("*.jpeg"), key=lambda path: path.stat().st_size))
    assert manager.runtime["bypass"] == [(types.dType.UINT32, [8, 2])] * 2  # the reader's ids and masks, reversed
    assert manager.runtime["queue_depth"] == 3 and manager.runtime["framework"].name == "PYTHON_FW"


def test_media_pipe_batches_have_the_declared_shapes_and_the_cpu_values(monkeypatch, tmp_path):
    _stack(monkeypatch)
    dataset = make_jpeg_dataset(tmp_path)
    device_loader = _loader(dataset, drop_last=False)
    assert device_loader.name == "habana-mediapipe" and device_loader.length == len(device_loader.loader) == 3
    batches = list(device_loader.loader)
    assert len(batches) == 3
    for batch in batches:
        assert batch["pixel_values"].shape == (2, 3, 16, 16) and batch["pixel_values"].dtype == torch.float32
        assert batch["input_ids"].shape == batch["attention_mask"].shape == (2, 8)
        assert batch["input_ids"].dtype == batch["attention_mask"].dtype == torch.long
        assert batch["return_loss"] is True
        for pixels, ids, mask in zip(batch["pixel_values"], batch["input_ids"], batch["attention_mask"]):
            row = int(ids[0]) - 1
            assert ids.tolist() == [row + 1] * 8 and mask.tolist() == [1] * 6 + [0, 0]
            want = pil_reference(dataset[row]["image"]["path"], 16, MEAN, STD)
            assert np.abs(pixels.numpy() - want).max() < 1e-4


def test_media_pipe_drop_last_drops_or_pads_the_last_batch(monkeypatch, tmp_path):
    _stack(monkeypatch)
    dataset = make_jpeg_dataset(tmp_path)  # 5 rows, batches of 2
    dropped = _first_ids(_loader(dataset, drop_last=True).loader)
    assert len(dropped) == 2 and len(set(sum(dropped, []))) == 4  # full batches only, as dataloader_drop_last
    padded = _first_ids(_loader(dataset, drop_last=False).loader)
    order = sum(padded, [])
    assert len(padded) == 3 and set(order[:5]) == {1, 2, 3, 4, 5}
    assert order[5] == order[0]  # the short last batch is filled from the epoch's start, not left short


def test_media_pipe_set_epoch_reshuffles_the_real_pipe(monkeypatch, tmp_path):
    _stack(monkeypatch)
    from habana_frameworks.mediapipe import fn

    reader_class = habana_media_pipe.media_pipe_classes()[0]
    plan = RankBatchPlan(5, 2, seed=0)
    op = fn.MediaExtReaderOp(impl=reader_class, num_outputs=3, priv_params={"plan": plan})
    assert op.params["priv_params"]["plan"] is not plan  # the library deep-copies: set_epoch would not reach a copy
    loader = _loader(make_jpeg_dataset(tmp_path), drop_last=False).loader
    epoch0 = _first_ids(loader)
    assert _first_ids(loader) == epoch0  # the same epoch again: the same order
    loader.set_epoch(1)
    epoch1 = _first_ids(loader)
    assert epoch1 != epoch0 and set(sum(epoch1, [])) == set(sum(epoch0, [])) == {1, 2, 3, 4, 5}


def test_media_pipe_resume_skips_in_the_plan_once(monkeypatch, tmp_path):
    _stack(monkeypatch)
    loader = _loader(make_jpeg_dataset(tmp_path), drop_last=False).loader
    whole = _first_ids(loader)
    loader.skip_batches_once(1)
    assert _first_ids(loader) == whole[1:]  # the resumed epoch starts after the trained batch
    assert _first_ids(loader) == whole  # the next pass is whole again


def _saved_byte_images(tmp_path, fmt="JPEG"):
    """A save_to_disk set whose Image feature holds bytes (as a Hub parquet set), reloaded as prepare_data has it."""
    import datasets

    source = make_jpeg_dataset(tmp_path / "source", fmt=fmt, in_memory=True).cast_column("image", datasets.Image())
    source.save_to_disk(str(tmp_path / "saved"))
    originals = [row["image"]["bytes"] for row in source.cast_column("image", datasets.Image(decode=False))]
    load = lambda: datasets.load_from_disk(str(tmp_path / "saved")).cast_column(  # noqa: E731
        "image", datasets.Image(decode=False))
    return load, originals


def test_byte_images_are_written_once_as_jpeg_files_then_decoded(monkeypatch, tmp_path, hf_cache):
    _stack(monkeypatch)
    (tmp_path / "source").mkdir()
    load, originals = _saved_byte_images(tmp_path)
    first = _loader(load(), drop_last=False)
    folder = cache_folder(first.loader.dataset, "image")
    files = sorted(folder.glob("*.jpg"))
    assert folder.is_relative_to(hf_cache) and len(files) == 5 and not list(folder.glob(".*"))
    assert [f.read_bytes() for f in files] == originals  # written as they are, not re-encoded
    long_ago = 1_000_000_000 * 10**9
    for f in files:
        os.utime(f, ns=(long_ago, long_ago))
    again = _loader(load(), drop_last=False)  # the next run: same dataset, same fingerprint
    assert cache_folder(again.loader.dataset, "image") == folder
    assert {f.stat().st_mtime_ns for f in folder.glob("*.jpg")} == {long_ago}  # found, not rewritten
    for batch in again.loader:
        for pixels, ids in zip(batch["pixel_values"], batch["input_ids"]):
            want = pil_reference(originals[int(ids[0]) - 1], 16, MEAN, STD)
            assert np.abs(pixels.numpy() - want).max() < 1e-4


def test_byte_images_that_are_not_jpeg_are_refused(monkeypatch, tmp_path, hf_cache):
    _stack(monkeypatch)
    (tmp_path / "source").mkdir()
    load, _ = _saved_byte_images(tmp_path, fmt="PNG")
    with pytest.raises(DeviceDecodeUnavailable, match=r"JPEG only, and 5 of 5 images are not \(first: row 0\)"):
        _loader(load())
    assert not hf_cache.exists()  # nothing written for images the pipe cannot read


def test_a_cached_file_is_written_whole_or_not_at_all(monkeypatch, tmp_path):
    target = tmp_path / "cache" / "00000000.jpg"

    real_write = Path.write_bytes

    def crash(self, data):
        real_write(self, data[:10])  # part of the file, then the disk is full
        raise OSError("disk full")

    monkeypatch.setattr(Path, "write_bytes", crash)
    with pytest.raises(OSError, match="disk full"):
        write_once(target, b"\xff\xd8\xff" + bytes(100))
    assert list(target.parent.iterdir()) == []  # no half file under the final name, no temporary left
    monkeypatch.undo()
    assert write_once(target, b"\xff\xd8\xff" + bytes(100)) == str(target) and target.stat().st_size == 103
