"""NVIDIA adapter on CPU: faked torch.cuda, the real pynvml over a C libnvidia-ml stub; real GPUs: @pytest.mark.cuda."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from bridgetower_mlflow.accelerators.cpu import CpuAccelerator
from bridgetower_mlflow.accelerators.cuda import nvjpeg
from bridgetower_mlflow.accelerators.cuda.adapter import CudaAccelerator
from bridgetower_mlflow.accelerators.cuda.arguments import cuda_training_kwargs, nvidia_label
from bridgetower_mlflow.contract import ADVICE_TAG, ENERGY_METRIC
from bridgetower_mlflow.data.cpu_images import ImageSpec
from bridgetower_mlflow.data.device_decode.batch_plan import RankBatchPlan
from bridgetower_mlflow.data.device_decode.image_ops import DeviceImageOps
from bridgetower_mlflow.data.device_decode.sources import JpegBytesCollate
from bridgetower_mlflow.errors import AcceleratorUnavailable, ConfigError, DeviceDecodeUnavailable
from bridgetower_mlflow.launch.ranks import RankInfo
from bridgetower_mlflow.samplers.mlflow_collectors import mlflow_collectors

from tests.fakes import fake_cuda
from tests.fakes.data import make_jpeg_dataset, pil_reference
from tests.fakes.native_libs import Mig, gpus, nvml_stub  # noqa: F401 - nvml_stub: a fixture
from tests.fakes.native_libs.observation import observe
from tests.fakes.requests import MEAN, STD, decode_request, device, settings

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


def test_cuda_takes_the_detected_label(monkeypatch, nvml_stub):
    fake_cuda(monkeypatch, names=("NVIDIA H100 80GB HBM3",))
    nvml_stub.set(driver="580.65.06")
    info = CudaAccelerator("cuda").detect(1, 1)
    assert (info.kind, info.device_name, info.count, info.memory_gb) == ("h100", "NVIDIA H100 80GB HBM3", 1, 80.0)
    assert info.driver == "580.65.06" and info.software["cuda"] == "12.8"  # NVML's version string, decoded
    assert info.extra_tags["cuda.compute_capability"] == "9.0"
    assert nvml_stub.calls() == ["nvmlInitWithFlags", "nvmlSystemGetDriverVersion", "nvmlShutdown"]


def test_a_mig_slice_is_detected_with_its_own_sm_count(monkeypatch, nvml_stub):
    """CUDA names a MIG device after its GPU and profile and reports the slice's own SMs: the peak's share."""
    import torch

    name = "NVIDIA H100 80GB HBM3 MIG 1g.10gb"
    fake_cuda(monkeypatch, names=(name,), memory_gb=10)
    slice_props = types.SimpleNamespace(**vars(torch.cuda.get_device_properties(0)), multi_processor_count=16)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: slice_props)
    info = CudaAccelerator("h100").detect(1, 1)
    assert (info.kind, info.device_name, info.extra_tags["cuda.sm_count"]) == ("h100", name, "16")


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


def test_device_decode_without_torchvision_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torchvision", None)  # import fails as if not installed
    monkeypatch.setattr("bridgetower_mlflow.accelerators.installed.BROKEN_MODULES", {})
    with pytest.raises(DeviceDecodeUnavailable) as error:
        CudaAccelerator("cuda").device_decode_loader(decode_request(make_jpeg_dataset(tmp_path)))
    assert str(error.value) == ("torchvision is not usable (ModuleNotFoundError: import of torchvision halted; None "
                                "in sys.modules); install the torchvision of your torch's release line "
                                "(pip install '.[cuda]')")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_device_decode_without_a_gpu_says_so(tmp_path):
    pytest.importorskip("torchvision", reason="torchvision absent: the test above covers that reason")
    with pytest.raises(DeviceDecodeUnavailable) as error:
        CudaAccelerator("cuda").device_decode_loader(decode_request(make_jpeg_dataset(tmp_path)))
    assert str(error.value) == "no CUDA device is visible to torch"


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


def mlflow_gpu_sample(job_gpus: int) -> dict[str, float]:
    """One sample of MLflow's own GPUMonitor as the project drives it for a job on `job_gpus` GPUs."""
    (gpu,) = [c for c in mlflow_collectors(job_gpus) if type(c.collector).__name__ == "GPUMonitor"]
    return gpu.sample()


def indices(metrics) -> set[str]:
    return {name.split("_")[1] for name in metrics if name.startswith("gpu_")}


def test_mlflow_gpu_metrics_and_extra_sampler(nvml_stub, monkeypatch):
    nvml_stub.set(gpus(4))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # ordinals are NVML indices then
    (sampler,) = CudaAccelerator("cuda").device_samplers(device("cuda", count=2))
    metrics = sampler.sample()
    assert metrics["gpu_2_sm_clock_mhz"] == 1980.0 and metrics["gpu_3_temperature_celsius"] == 61.0
    assert metrics["gpu_3_memory_bandwidth_utilization_percentage"] == 42.0 and indices(metrics) == {"2", "3"}
    mlflow_names = ("utilization_percentage", "memory_usage_megabytes", "memory_usage_percentage",
                    "power_usage_watts", "power_usage_percentage")
    assert not [name for name in metrics if name.endswith(mlflow_names) and "bandwidth" not in name]
    mlflow = mlflow_gpu_sample(2)  # MLflow's names and units, for the same two GPUs
    assert indices(mlflow) == {"2", "3"} and mlflow["gpu_3_utilization_percentage"] == 90.0
    assert mlflow["gpu_2_memory_usage_megabytes"] == 30000.0 and mlflow["gpu_2_memory_usage_percentage"] == 37.5
    assert mlflow["gpu_3_power_usage_watts"] == 350.0 and mlflow["gpu_3_power_usage_percentage"] == 50.0
    assert sampler.energy_joules() == 2000.0  # two counters of 1e6 mJ
    sampler.stop()
    calls = nvml_stub.calls()
    assert "nvmlDeviceGetHandleByIndex_v2" in calls and calls.count("nvmlShutdown") == 1


def test_gpus_are_found_by_uuid_whatever_the_cuda_order(nvml_stub, monkeypatch):
    """CUDA (fastest first) sees NVML's GPUs 3 and 1, in that order: metrics name the right ones."""
    host = gpus(4)
    host[3].clock_mhz, host[1].clock_mhz = 1410, 1755
    nvml_stub.set(host)
    fake_cuda(monkeypatch, names=("NVIDIA H100 80GB HBM3",) * 2, uuids=[host[3].uuid[4:], host[1].uuid[4:]])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    metrics = CudaAccelerator("cuda").device_samplers(device("h100", count=2))[0].sample()
    assert (metrics["gpu_3_sm_clock_mhz"], metrics["gpu_1_sm_clock_mhz"]) == (1410.0, 1755.0)
    assert indices(metrics) == {"1", "3"} and indices(mlflow_gpu_sample(2)) == {"1", "3"}


def test_uuid_and_mig_entries_in_cuda_visible_devices(nvml_stub, monkeypatch, caplog):
    """A MIG device is named by its parent GPU (NVML gives it its index inside that GPU) and reads its own memory;
    CUDA ignores what follows an entry it cannot resolve."""
    host = gpus(3)
    mig = Mig("MIG-7f3a9c2e-1111-2222-3333-444444444444", parent=2, index=1, memory_used=4 * 10**9)
    nvml_stub.set(host, migs=[mig])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{mig.uuid},{host[1].uuid},GPU-no-such-gpu,{host[0].uuid}")
    with caplog.at_level("WARNING"):
        sampler = CudaAccelerator("cuda").device_samplers(device("cuda", count=3))[0]
        metrics = sampler.sample()
    assert indices(metrics) == {"1"}  # the MIG device refuses clocks, temperature and utilization
    assert "GPU 2: sm_clock_mhz unavailable (Not Supported)" in caplog.text
    assert sampler.energy_joules() is None  # nor does it count energy: the window says so, not 0 J
    mlflow = mlflow_gpu_sample(3)
    assert indices(mlflow) == {"1", "2"} and mlflow["gpu_2_memory_usage_megabytes"] == 4000.0
    assert "gpu_2_utilization_percentage" not in mlflow and mlflow["gpu_1_memory_usage_megabytes"] == 30000.0


def test_one_refused_nvml_call_keeps_the_rest_of_the_sample(nvml_stub, monkeypatch, caplog):
    host = gpus(2)
    host[0].not_supported = {"nvmlDeviceGetUtilizationRates"}
    nvml_stub.set(host)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    sampler = CudaAccelerator("cuda").device_samplers(device("cuda", count=2))[0]
    with caplog.at_level("WARNING"):
        first, second = sampler.sample(), sampler.sample()
    assert "gpu_0_memory_bandwidth_utilization_percentage" not in first and first == second
    assert first["gpu_0_sm_clock_mhz"] == 1980.0 and first["gpu_1_memory_bandwidth_utilization_percentage"] == 42.0
    assert caplog.text.count("memory_bandwidth_utilization_percentage unavailable (Not Supported)") == 1
    mlflow = mlflow_gpu_sample(2)
    assert "gpu_0_utilization_percentage" not in mlflow and mlflow["gpu_0_memory_usage_megabytes"] == 30000.0
    assert mlflow["gpu_1_utilization_percentage"] == 90.0


def test_nvml_refusing_to_start_turns_telemetry_off(nvml_stub, caplog):
    nvml_stub.set(init_error=9)  # libnvidia-ml installed, no driver loaded
    with caplog.at_level("WARNING"):
        assert CudaAccelerator("cuda").device_samplers(device("cuda")) == []
    assert "NVML failed to start (NVMLError_DriverNotLoaded: Driver Not Loaded)" in caplog.text
    assert mlflow_collectors(1) and not [c for c in mlflow_collectors(1) if "GPU" in type(c.collector).__name__]


SAMPLERS_IN_A_CHILD = (
    "import ctypes, logging, sys\n"
    "logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format='%(message)s')\n"
    "try:\n    ctypes.CDLL('libnvidia-ml.so.1')\nexcept OSError:\n    print('no libnvidia-ml')\n"
    "from bridgetower_mlflow.accelerators.base import DeviceInfo\n"
    "from bridgetower_mlflow.accelerators.cuda.adapter import CudaAccelerator\n"
    "from bridgetower_mlflow.accelerators.cuda.driver import nvidia_driver_version\n"
    "print([type(s).__name__ for s in CudaAccelerator('cuda').device_samplers(DeviceInfo('cuda', 'GPU', 1))])\n"
    "print('driver', nvidia_driver_version())\n")


def test_nvml_library_missing_turns_telemetry_off(nvml_stub, tmp_path):
    """In a child process: found through LD_LIBRARY_PATH by its soname, then absent (pynvml's LibraryNotFound)."""
    env = {**nvml_stub.env(), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    found = subprocess.run([sys.executable, "-c", SAMPLERS_IN_A_CHILD], env=env, capture_output=True, text=True,
                           timeout=120, cwd=tmp_path)
    assert found.stdout.splitlines()[-2:] == ["['NvmlSampler']", "driver 570.86.15"], found.stderr
    env["LD_LIBRARY_PATH"] = str(tmp_path)  # a folder without the library
    absent = subprocess.run([sys.executable, "-c", SAMPLERS_IN_A_CHILD], env=env, capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    if "no libnvidia-ml" not in absent.stdout:
        pytest.skip("this host has a real libnvidia-ml.so.1")
    assert "GPU telemetry off: NVML failed to start (NVMLError_LibraryNotFound: NVML Shared Library Not Found)" \
        in absent.stdout, absent.stderr
    assert absent.stdout.splitlines()[-2:] == ["[]", "driver None"]


def test_only_the_jobs_gpus_are_logged_and_advised_on(nvml_stub, monkeypatch):
    """A shared 8-GPU host, busy at 97 %; the job holds GPUs 5 and 2 (by UUID), busy at 30 and 40 %: the system
    metrics, the energy and the advice are those two GPUs', named by NVML index."""
    host = gpus(8, utilization=97)
    host[5].utilization, host[2].utilization = 30, 40
    nvml_stub.set(host)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{host[5].uuid},{host[2].uuid}")

    def run_a_while():
        for number, gpu in enumerate(host):
            gpu.energy_mj += 1000 * (number + 1)  # 6 J on GPU 5, 3 J on GPU 2, 27 J elsewhere
        nvml_stub.write()

    series, metrics, tags = observe(monkeypatch, CudaAccelerator("cuda"), device("h100", count=2),
                                    RankInfo(0, 0, 2, 2), during=run_a_while)
    assert indices(name[len("system/"):] for name in series) == {"2", "5"}
    assert series["system/gpu_5_utilization_percentage"][0] == 30.0 and "system/gpu_2_sm_clock_mhz" in series
    assert "busy only 35 % of the time" in tags[ADVICE_TAG]
    assert metrics[ENERGY_METRIC] == pytest.approx(9.0)


def test_a_cpu_job_on_a_gpu_host_logs_no_gpu_metrics(nvml_stub, monkeypatch):
    series, _, tags = observe(monkeypatch, CpuAccelerator("cpu"), device("cpu"), RankInfo(0, 0, 1, 1))
    assert "system/main_process_cpu_percentage" in series and not indices(n[len("system/"):] for n in series)
    assert tags[ADVICE_TAG].startswith("compute-bound")  # no device utilization to judge by


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
    assert CudaAccelerator("cuda").device_decode_loader_name == "nvjpeg"


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


def _recording_streams(monkeypatch, calls):
    """torch.cuda's stream API as it behaves, recording its calls: Stream(device) a new stream, stream(s) a context
    in which s is the current stream, current_stream(device) the current one (the compute stream outside any
    context), Stream.wait_stream(other) / synchronize(), Tensor.record_stream(stream); and torchvision's CUDA
    decode, recording the stream current when it is called."""
    import contextlib

    class Stream:
        def __init__(self, device=None, priority=0, name="side"):
            self.name = name

        def wait_stream(self, other):
            calls.append(("wait_stream", self.name, other.name))

        def synchronize(self):
            calls.append(("synchronize", self.name))

    current = [Stream(name="compute")]

    @contextlib.contextmanager
    def stream(chosen):
        previous, current[0] = current[0], chosen
        try:
            yield
        finally:
            current[0] = previous

    def decode_jpeg(data, mode=None, device="cpu"):
        calls.append(("decode", current[0].name))
        return _pil_decode(data, device)

    io_module = types.ModuleType("torchvision.io")
    io_module.decode_jpeg, io_module.ImageReadMode = decode_jpeg, types.SimpleNamespace(RGB="RGB")
    monkeypatch.setitem(sys.modules, "torchvision", types.ModuleType("torchvision"))
    monkeypatch.setitem(sys.modules, "torchvision.io", io_module)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "stream", stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: current[0])
    monkeypatch.setattr(torch.Tensor, "record_stream", lambda tensor, used_on: calls.append(
        ("record_stream", used_on.name)), raising=False)


def test_decode_runs_on_a_side_stream_the_compute_stream_waits_for(monkeypatch, tmp_path):
    """The next batch decodes beside the step: on its own stream (torchvision's hazard drained there, never on the
    compute stream), the compute stream waits for it on the device, and its tensors are marked as used there."""
    calls, dataset = [], make_jpeg_dataset(tmp_path)
    _recording_streams(monkeypatch, calls)
    batches = list(_batches(dataset))
    assert len(batches) == 2 and ("synchronize", "compute") not in calls
    per_batch = [("synchronize", "side"), ("decode", "side"), ("wait_stream", "compute", "side"),
                 ("record_stream", "compute"), ("record_stream", "compute"), ("record_stream", "compute")]
    assert calls == per_batch * 2


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
    assert resumed.dataset is not None and len(resumed) == 4  # the resumed epoch's batches: what the loop reads
    assert [b["input_ids"][:, 0].tolist() for b in resumed] == whole[2:]
    assert len(resumed) == 6  # every later epoch whole
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

    from bridgetower_mlflow.accelerators import installed

    monkeypatch.syspath_prepend(str(broken_torchvision(tmp_path)))
    monkeypatch.setattr(installed, "BROKEN_MODULES", {})
    monkeypatch.delitem(sys.modules, "torchvision", raising=False)
    reason = installed.hide_if_broken("torchvision")
    try:
        assert reason.startswith("RuntimeError: Detected that PyTorch and torchvision were compiled")
        assert importlib.util.find_spec("torchvision") is None  # transformers now sees no torchvision
        with pytest.raises(DeviceDecodeUnavailable, match="different CUDA major versions"):
            nvjpeg.check_nvjpeg_ready("cuda")
    finally:
        sys.modules.pop("torchvision", None)
