"""NVIDIA adapter on CPU with a faked torch.cuda and pynvml; real-GPU checks carry @pytest.mark.cuda."""

from __future__ import annotations

import dataclasses
import io
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from bridgetower_mlflow.accelerators.cuda import nvjpeg  # noqa: E402
from bridgetower_mlflow.accelerators.cuda.adapter import CudaAccelerator  # noqa: E402
from bridgetower_mlflow.accelerators.cuda.arguments import cuda_training_kwargs, nvidia_label  # noqa: E402
from bridgetower_mlflow.data.device_decode.batch_plan import RankBatchPlan  # noqa: E402
from bridgetower_mlflow.data.device_decode.image_ops import DeviceImageOps  # noqa: E402
from bridgetower_mlflow.data.device_decode.sources import JpegBytesCollate  # noqa: E402
from bridgetower_mlflow.data.image_transform import ImageSpec  # noqa: E402
from bridgetower_mlflow.errors import AcceleratorUnavailable, ConfigError, DeviceDecodeUnavailable  # noqa: E402

from fakes import fake_cuda, install_pynvml  # noqa: E402
from fakes.data import make_jpeg_dataset, pil_reference  # noqa: E402
from fakes.nvml import gpus  # noqa: E402
from fakes.requests import MEAN, STD, decode_request, device, settings  # noqa: E402

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no NVIDIA GPU visible to torch")
COMMON = {"output_dir": "out", "per_device_train_batch_size": 4, "report_to": "none", "remove_unused_columns": False}


def assert_same_meaning(got, want, levels=3):
    """Equal to a few levels of 255 inside; PIL's boxed resize also reads pixels just outside the
    crop, so the outer two rows/columns may differ a little more."""
    diff = np.abs(got - want)
    assert diff[..., 2:-2, 2:-2].max() < levels / 255 / 0.26
    assert diff.mean() < 1 / 255 / 0.26


@pytest.mark.parametrize("name, label", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", "h100"), ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA H200", "h200"), ("NVIDIA H200 NVL", "h200"), ("NVIDIA GH200 480GB", "cuda"),
    ("NVIDIA L4", "cuda"), ("Tesla V100-SXM2-16GB", "cuda"),
])
def test_label_comes_from_the_device_name(name, label):
    assert nvidia_label(name) == label


def test_cuda_takes_the_detected_label(monkeypatch):
    fake_cuda(monkeypatch, names=("NVIDIA H100 80GB HBM3",))
    install_pynvml(monkeypatch)
    info = CudaAccelerator("cuda").detect(1, 1)
    assert (info.kind, info.device_name, info.count, info.memory_gb) == ("h100", "NVIDIA H100 80GB HBM3", 1, 80.0)
    assert info.driver == "570.86.15" and info.software["cuda"] == "12.8"
    assert info.extra_tags["cuda.compute_capability"] == "9.0"


def test_h100_on_a_detected_a100_names_both(monkeypatch):
    fake_cuda(monkeypatch, names=("NVIDIA A100-SXM4-80GB",), capability=(8, 0))
    with pytest.raises(AcceleratorUnavailable) as error:
        CudaAccelerator("h100").detect(1, 1)
    message = str(error.value)
    assert "h100" in message and "A100-SXM4-80GB" in message and "a100" in message and "\n" not in message


def test_matching_model_name_passes(monkeypatch):
    fake_cuda(monkeypatch, names=("NVIDIA H200",) * 2)
    assert CudaAccelerator("h200").detect(2, 2).kind == "h200"


def test_too_few_gpus_names_the_field(monkeypatch):
    fake_cuda(monkeypatch, names=("NVIDIA H100 80GB HBM3",))
    with pytest.raises(AcceleratorUnavailable, match=r"devices: invalid value 4 .*1 NVIDIA GPU\(s\) visible"):
        CudaAccelerator("cuda").detect(4, 4)


def test_mixed_gpu_models_are_refused(monkeypatch):
    fake_cuda(monkeypatch, names=("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"))
    with pytest.raises(AcceleratorUnavailable, match="different models"):
        CudaAccelerator("cuda").detect(2, 2)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_absent_gpu_is_one_clear_line():
    with pytest.raises(AcceleratorUnavailable) as error:
        CudaAccelerator("a100").detect(1, 1)
    assert str(error.value).startswith("accel: a100 requested but no NVIDIA GPU is visible")
    assert "allowed here: cpu" in str(error.value)


def test_training_kwargs_bf16_tf32_nccl():
    kwargs = cuda_training_kwargs(dict(COMMON, use_cpu=True), settings(COMMON, world_size=2),
                                  bf16_ok=True, tf32_ok=True)
    assert kwargs["bf16"] is True and kwargs["tf32"] is True and kwargs["ddp_backend"] == "nccl"
    assert "use_cpu" not in kwargs
    assert kwargs["dataloader_pin_memory"] is True and kwargs["accelerator_config"] == {"non_blocking": True}
    from transformers import TrainingArguments

    assert set(kwargs) <= {f.name for f in dataclasses.fields(TrainingArguments)}


def test_training_kwargs_fp32_and_user_tf32_override():
    kwargs = cuda_training_kwargs(dict(COMMON, tf32=False), settings(COMMON, precision="fp32"),
                                  bf16_ok=True, tf32_ok=True)
    assert kwargs["bf16"] is False and kwargs["tf32"] is False and "ddp_backend" not in kwargs


def test_training_kwargs_refuse_what_the_gpu_cannot_do():
    with pytest.raises(ConfigError, match="precision"):
        cuda_training_kwargs(COMMON, settings(COMMON, precision="bf16"), bf16_ok=False, tf32_ok=False)
    with pytest.raises(ConfigError, match="distribution_strategy: invalid value 'fast_ddp'"):
        cuda_training_kwargs(COMMON, settings(COMMON, strategy="fast_ddp"), bf16_ok=True, tf32_ok=True)
    auto = cuda_training_kwargs(COMMON, settings(COMMON), bf16_ok=False, tf32_ok=False)
    assert "bf16" not in auto and "tf32" not in auto


def test_crop_resize_normalize_matches_the_cpu_reference(tmp_path):
    dataset = make_jpeg_dataset(tmp_path)
    paths = [row["path"] for row in dataset["image"]]
    from PIL import Image

    images = [torch.from_numpy(np.asarray(Image.open(p).convert("RGB")).transpose(2, 0, 1).copy()) for p in paths]
    ops = DeviceImageOps(ImageSpec(32, MEAN, STD), "cpu")
    got = ops.normalize(ops.crop_resize(images)).numpy()
    want = np.stack([pil_reference(p, 32, MEAN, STD) for p in paths])
    assert got.shape == (5, 3, 32, 32)
    assert_same_meaning(got, want)


def _pil_decode(jpegs, device):
    """What nvJPEG returns, computed on the CPU: (3,H,W) uint8 RGB tensors."""
    import io

    from PIL import Image

    return [torch.from_numpy(np.asarray(Image.open(io.BytesIO(j.numpy().tobytes())).convert("RGB"))
                             .transpose(2, 0, 1).copy()) for j in jpegs]


def _batches(dataset, drop_last=True, batch_size=2):
    plan = RankBatchPlan(len(dataset), batch_size, seed=1, drop_last=drop_last)
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=plan, collate_fn=JpegBytesCollate("image"))
    return nvjpeg.NvjpegBatches(loader, plan, dataset, DeviceImageOps(ImageSpec(16, MEAN, STD), "cpu"))


def test_nvjpeg_batches_decode_and_transform(tmp_path, monkeypatch):
    dataset = make_jpeg_dataset(tmp_path)
    monkeypatch.setattr(nvjpeg, "decode_on_gpu", _pil_decode)
    assert [b["pixel_values"].shape[0] for b in _batches(dataset)] == [2, 2]  # dataloader_drop_last holds
    batches = list(_batches(dataset, drop_last=False))
    assert [b["pixel_values"].shape[0] for b in batches] == [2, 2, 1]
    first = batches[0]
    assert first["return_loss"] is True and first["input_ids"].dtype == torch.long
    row = int(first["input_ids"][0, 0]) - 1
    want = pil_reference(dataset[row]["image"]["path"], 16, MEAN, STD)
    assert_same_meaning(first["pixel_values"][0].numpy(), want)


def test_collate_reads_bytes_and_paths(tmp_path):
    on_disk = make_jpeg_dataset(tmp_path)
    in_memory = make_jpeg_dataset(tmp_path, in_memory=True)
    collate = JpegBytesCollate("image")
    for dataset in (on_disk, in_memory):
        batch = collate([dataset[0], dataset[1]])
        assert bytes(batch["jpegs"][0].numpy()[:3]) == b"\xff\xd8\xff"
        assert batch["attention_mask"].tolist()[0] == [1] * 6 + [0, 0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_device_decode_unavailable_says_why(tmp_path):
    with pytest.raises(DeviceDecodeUnavailable) as error:
        CudaAccelerator("cuda").device_decode_loader(decode_request(make_jpeg_dataset(tmp_path)))
    assert "torchvision" in str(error.value) or "no CUDA device" in str(error.value)


def test_png_is_refused_with_a_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(nvjpeg, "check_nvjpeg_ready", lambda device: None)
    dataset = make_jpeg_dataset(tmp_path, fmt="PNG")
    with pytest.raises(DeviceDecodeUnavailable, match="JPEG only"):
        nvjpeg.build_nvjpeg_loader(decode_request(dataset), "cpu")


def test_rank_plans_split_the_data_and_reshuffle():
    plans = [RankBatchPlan(10, 3, seed=7, rank=r, world_size=2, drop_last=False) for r in range(2)]
    seen = [i for plan in plans for batch in plan for i in batch]
    assert sorted(seen) == list(range(10)) and len(plans[0]) == 2
    first = [list(plans[0])]
    plans[0].set_epoch(1)
    assert [list(plans[0])] != first
    padded = RankBatchPlan(5, 4, seed=0, drop_last=False)
    padded.pad_last_batch = True
    assert [len(b) for b in padded] == [4, 4]
    assert [len(b) for b in RankBatchPlan(5, 4, seed=0)] == [4]  # drop_last: full batches only
    resumed = RankBatchPlan(12, 2, seed=0)
    whole = list(resumed)
    resumed.skip_once(4)
    assert list(resumed) == whole[4:] and list(resumed) == whole  # the skip applies to one pass only


def test_mlflow_gpu_metrics_and_extra_sampler(monkeypatch):
    install_pynvml(monkeypatch, gpus(4))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # ordinals are NVML indices then
    adapter = CudaAccelerator("cuda")
    (sampler,) = adapter.device_samplers(device("cuda", count=2))
    metrics = sampler.sample()
    assert metrics["gpu_2_sm_clock_mhz"] == 1980.0
    assert metrics["gpu_3_memory_bandwidth_utilization_percentage"] == 42.0
    mlflow_names = ("utilization_percentage", "memory_usage_megabytes", "memory_usage_percentage",
                    "power_usage_watts", "power_usage_percentage")
    assert not [name for name in metrics if name.endswith(mlflow_names) and "bandwidth" not in name]


def test_gpus_are_found_by_uuid_whatever_the_cuda_order(monkeypatch):
    """CUDA (fastest first) sees NVML's GPUs 3 and 1, in that order: metrics name the right ones."""
    devices = gpus(4)
    install_pynvml(monkeypatch, devices)
    fake_cuda(monkeypatch, names=("NVIDIA H100 80GB HBM3",) * 2, uuids=[devices[3].uuid[4:], devices[1].uuid[4:]])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    devices[3].clock_mhz, devices[1].clock_mhz = 1410, 1755
    metrics = CudaAccelerator("cuda").device_samplers(device("h100", count=2))[0].sample()
    assert (metrics["gpu_3_sm_clock_mhz"], metrics["gpu_1_sm_clock_mhz"]) == (1410.0, 1755.0)
    assert not any(name.startswith(("gpu_0_", "gpu_2_")) for name in metrics)


def test_uuid_and_mig_entries_in_cuda_visible_devices(monkeypatch):
    devices = gpus(3)
    devices[2].uuid = "MIG-7f3a9c2e-1111-2222-3333-444444444444"
    install_pynvml(monkeypatch, devices)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{devices[2].uuid},{devices[1].uuid}")
    metrics = CudaAccelerator("cuda").device_samplers(device("cuda", count=2))[0].sample()
    assert {name.split("_")[1] for name in metrics} == {"2", "1"}


def test_one_refused_nvml_call_keeps_the_rest_of_the_sample(monkeypatch):
    devices = gpus(2)
    devices[0].not_supported = {"utilization"}  # MIG: no utilization rates
    install_pynvml(monkeypatch, devices)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    metrics = CudaAccelerator("cuda").device_samplers(device("cuda", count=2))[0].sample()
    assert "gpu_0_memory_bandwidth_utilization_percentage" not in metrics
    assert metrics["gpu_0_sm_clock_mhz"] == 1980.0 and metrics["gpu_1_memory_bandwidth_utilization_percentage"] == 42.0


def test_nvml_library_missing_turns_telemetry_off(monkeypatch, caplog):
    install_pynvml(monkeypatch, library=False)
    with caplog.at_level("WARNING"):
        assert CudaAccelerator("cuda").device_samplers(device("cuda")) == []
    assert "NVML Shared Library Not Found" in caplog.text


@pytest.mark.cuda
@needs_gpu
def test_real_gpu_detect_and_arguments():
    adapter = CudaAccelerator("cuda")
    info = adapter.detect(1, 1)
    assert info.kind in ("a100", "h100", "h200", "cuda") and info.memory_gb > 0
    args = adapter.recipe(info, settings(dict(COMMON))).build_arguments()
    assert args.bf16 is True and args.tf32 is True
    assert adapter.peak_memory_gb() is not None


@pytest.mark.cuda
@needs_gpu
def test_real_nvjpeg_loader_matches_cpu_reference(tmp_path):
    pytest.importorskip("torchvision", reason="torchvision not installed")
    dataset = make_jpeg_dataset(tmp_path)
    device_loader = CudaAccelerator("cuda").device_decode_loader(
        decode_request(dataset, batch_size=5, image_size=32, num_workers=1))
    assert device_loader.name == "nvjpeg" and device_loader.length == 1
    (batch,) = list(device_loader.loader)
    assert batch["pixel_values"].is_cuda and batch["pixel_values"].shape == (5, 3, 32, 32)
    for position in range(5):
        row = int(batch["input_ids"][position, 0]) - 1
        want = pil_reference(dataset[row]["image"]["path"], 32, MEAN, STD)
        # nvJPEG's IDCT differs from libjpeg's by a few levels; the meaning must be the same
        assert np.abs(batch["pixel_values"][position].cpu().numpy() - want).mean() < 4 / 255 / 0.26


def test_cuda_adapter_reports_its_loader_name():
    assert CudaAccelerator("cuda").device_loader == "nvjpeg"


def _install_torchvision_decode(monkeypatch, calls):
    """torchvision.io.decode_jpeg as the CUDA path behaves: a batch in, RGB tensors out, RuntimeError on
    what nvJPEG cannot take; it records whether the caller's stream was drained first."""
    import types

    from PIL import Image

    def decode_jpeg(data, mode=None, device="cpu"):
        for item in data:
            blob = bytes(item.numpy())
            if not blob.startswith(b"\xff\xd8\xff") or Image.open(io.BytesIO(blob)).mode == "CMYK":
                raise RuntimeError("Error while decoding JPEG images: Failed to get image info: 2")
        calls.append(("decode", len(data)))
        return _pil_decode(data, device)

    io_module = types.ModuleType("torchvision.io")
    io_module.decode_jpeg, io_module.ImageReadMode = decode_jpeg, types.SimpleNamespace(RGB="RGB")
    monkeypatch.setitem(sys.modules, "torchvision", types.ModuleType("torchvision"))
    monkeypatch.setitem(sys.modules, "torchvision.io", io_module)

    class Stream:
        def synchronize(self):
            calls.append(("synchronize",))

    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())


def test_decode_waits_for_the_work_queued_on_the_current_stream(monkeypatch, tmp_path):
    calls = []
    _install_torchvision_decode(monkeypatch, calls)
    list(_batches(make_jpeg_dataset(tmp_path)))
    assert calls and calls[0] == ("synchronize",)
    assert all(calls[i - 1] == ("synchronize",) for i, call in enumerate(calls) if call[0] == "decode")


def test_images_nvjpeg_cannot_take_are_decoded_on_the_cpu_and_counted(monkeypatch, tmp_path):
    from PIL import Image

    calls = []
    _install_torchvision_decode(monkeypatch, calls)
    dataset = make_jpeg_dataset(tmp_path)
    rows = dataset.to_list()
    Image.open(rows[1]["image"]["path"]).convert("CMYK").save(rows[1]["image"]["path"], format="JPEG")
    Image.open(rows[3]["image"]["path"]).save(tmp_path / "odd.png")
    rows[3]["image"] = {"bytes": None, "path": str(tmp_path / "odd.png")}
    import datasets

    mixed = datasets.Dataset.from_list(rows).cast_column("image", datasets.Image(decode=False))
    batches = _batches(mixed, drop_last=False, batch_size=5)
    (batch,) = list(batches)
    assert batches.cpu_decoded_images == 2 and batch["pixel_values"].shape == (5, 3, 16, 16)
    for position in range(5):
        row = int(batch["input_ids"][position, 0]) - 1
        want = pil_reference(mixed[row]["image"]["path"], 16, MEAN, STD)
        assert_same_meaning(batch["pixel_values"][position].numpy(), want)


def test_the_loader_wait_times_the_byte_reader_not_the_decode(monkeypatch, tmp_path):
    """A slow decode (the GPU's work) is not input wait; only the host-side byte fetch is."""
    import time

    from bridgetower_mlflow.train.loaders import ResumingLoader

    def slow_decode(jpegs, device):
        time.sleep(0.2)
        return _pil_decode(jpegs, device)

    monkeypatch.setattr(nvjpeg, "decode_on_gpu", slow_decode)
    trainer = types.SimpleNamespace(state=types.SimpleNamespace(global_step=0),
                                    args=types.SimpleNamespace(gradient_accumulation_steps=1))
    loader = ResumingLoader(_batches(make_jpeg_dataset(tmp_path)), trainer, 2)
    started = time.perf_counter()
    assert len(list(loader)) == 2
    elapsed = time.perf_counter() - started
    assert elapsed >= 0.4 and loader.timed.wait_seconds < 0.25 * elapsed


def test_a_resumed_device_loader_skips_what_the_checkpoint_trained(monkeypatch, tmp_path):
    from bridgetower_mlflow.train.loaders import ResumingLoader

    monkeypatch.setattr(nvjpeg, "decode_on_gpu", _pil_decode)
    dataset = make_jpeg_dataset(tmp_path, sizes=((40, 30),) * 12)
    whole = [b["input_ids"][:, 0].tolist() for b in _batches(dataset)]
    trainer = types.SimpleNamespace(state=types.SimpleNamespace(global_step=8),  # 6 steps an epoch: 2 done
                                    args=types.SimpleNamespace(gradient_accumulation_steps=1))
    resumed = ResumingLoader(_batches(dataset), trainer, 6)
    assert resumed.dataset is not None and len(resumed) == 6  # what Trainer.num_examples and the loop read
    assert [b["input_ids"][:, 0].tolist() for b in resumed] == whole[2:]
    assert [b["input_ids"][:, 0].tolist() for b in resumed] == whole  # the next epoch is whole again


BROKEN_TORCHVISION = ("raise RuntimeError('Detected that PyTorch and torchvision were compiled with different CUDA "
                      "major versions. PyTorch has CUDA Version=12.8 and torchvision has CUDA Version=13.0.')\n")


def broken_torchvision(folder):
    """A torchvision whose import raises what a CUDA-major mismatch raises (torchvision/extension.py)."""
    (folder / "torchvision").mkdir(parents=True)
    (folder / "torchvision" / "__init__.py").write_text(BROKEN_TORCHVISION)
    (folder / "torchvision-0.28.0.dist-info").mkdir()
    (folder / "torchvision-0.28.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: torchvision\n"
                                                                      "Version: 0.28.0\n")
    return folder


def test_a_broken_torchvision_makes_device_decode_unavailable_with_its_reason(monkeypatch, tmp_path):
    import importlib.util

    from bridgetower_mlflow.accelerators import detection

    monkeypatch.syspath_prepend(str(broken_torchvision(tmp_path)))
    monkeypatch.setattr(detection, "BROKEN_MODULES", {})
    monkeypatch.delitem(sys.modules, "torchvision", raising=False)
    reason = detection.hide_if_broken("torchvision")
    try:
        assert reason.startswith("RuntimeError: Detected that PyTorch and torchvision were compiled")
        assert importlib.util.find_spec("torchvision") is None  # transformers now sees no torchvision
        with pytest.raises(DeviceDecodeUnavailable, match="different CUDA major versions"):
            nvjpeg.check_nvjpeg_ready("cuda")
    finally:
        sys.modules.pop("torchvision", None)
