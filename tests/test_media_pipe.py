"""The Gaudi media pipeline: the project's reader and pipe driven by the media loader."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from bridgetower_mlflow.accelerators.gaudi import media_pipe as habana_media_pipe  # noqa: E402
from bridgetower_mlflow.accelerators.gaudi.adapter import GaudiAccelerator  # noqa: E402
from bridgetower_mlflow.errors import DeviceDecodeUnavailable  # noqa: E402

from fakes.data import make_jpeg_dataset, pil_reference  # noqa: E402
from fakes.mediapipe import install_mediapipe  # noqa: E402
from fakes.requests import MEAN, STD, decode_request  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_pipe_classes():
    habana_media_pipe.media_pipe_classes.cache_clear()
    yield
    habana_media_pipe.media_pipe_classes.cache_clear()


def _loader(dataset, kind="gaudi2", drop_last=True):
    request = decode_request(dataset, num_workers=2, kind=kind, drop_last=drop_last)
    return GaudiAccelerator(kind).device_decode_loader(request)


def test_media_pipe_unavailable_reasons(monkeypatch, tmp_path):
    with pytest.raises(DeviceDecodeUnavailable, match="habana_frameworks.mediapipe is not importable"):
        _loader(make_jpeg_dataset(tmp_path))
    install_mediapipe(monkeypatch)
    with pytest.raises(DeviceDecodeUnavailable, match="row 0 of column 'image' has no readable local path"):
        _loader(make_jpeg_dataset(tmp_path, in_memory=True))
    with pytest.raises(DeviceDecodeUnavailable, match="JPEG only"):
        _loader(make_jpeg_dataset(tmp_path, fmt="PNG"))
    with pytest.raises(DeviceDecodeUnavailable, match="first-generation"):
        _loader(make_jpeg_dataset(tmp_path), kind="gaudi")  # what detection found decides, not the call order


def test_media_pipe_start_failure_is_reported(monkeypatch, tmp_path):
    install_mediapipe(monkeypatch, fail_on_build=RuntimeError("synStatus 26 [Device not found]"))
    with pytest.raises(DeviceDecodeUnavailable, match="failed to start: RuntimeError: synStatus 26"):
        _loader(make_jpeg_dataset(tmp_path))


def test_media_pipe_batches_mean_what_the_cpu_path_means(monkeypatch, tmp_path):
    install_mediapipe(monkeypatch)
    dataset = make_jpeg_dataset(tmp_path)
    assert _loader(dataset).length == 2  # dataloader_drop_last: full batches only, as the CPU loader
    device_loader = _loader(dataset, drop_last=False)
    assert device_loader.name == "habana-mediapipe" and device_loader.length == 3
    batches = list(device_loader.loader)
    assert [b["pixel_values"].shape for b in batches] == [torch.Size([2, 3, 16, 16])] * 3  # last one padded
    batch = batches[0]
    assert batch["return_loss"] is True and batch["input_ids"].dtype == torch.long
    row = int(batch["input_ids"][0, 0]) - 1
    want = pil_reference(dataset[row]["image"]["path"], 16, MEAN, STD)
    assert np.abs(batch["pixel_values"][0].numpy() - want).max() < 1e-4
    assert batch["attention_mask"][0].tolist() == [1] * 6 + [0, 0]
    epoch0 = [int(b["input_ids"][i, 0]) for b in batches for i in range(2)]
    device_loader.loader.set_epoch(1)
    epoch1 = [int(b["input_ids"][i, 0]) for b in device_loader.loader for i in range(2)]
    assert epoch1 != epoch0 and set(epoch1) == set(epoch0) == {1, 2, 3, 4, 5}
