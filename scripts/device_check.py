"""The device check's Python half: one cell's result row, a killed run marked FAILED, the table, the
nvJPEG-vs-CPU agreement. Called by scripts/device-check.sh; reads the store MLFLOW_TRACKING_URI names.

    python scripts/device_check.py header                          -> the TSV header
    python scripts/device_check.py row NAME WORKERS DECODE RC      -> one TSV row (marks a killed run FAILED)
    python scripts/device_check.py skipped WORKERS DECODE          -> the row of a cell the time budget skipped
    python scripts/device_check.py table results.tsv               -> the aligned table
    python scripts/device_check.py agreement                       -> nvJPEG vs the CPU path, sample set
"""

from __future__ import annotations

import statistics
import sys

EXPERIMENT = "device-check"
COLUMNS = ("workers", "device_decode", "data_loader", "decode", "samples_per_s", "per_device", "wait",
           "input_bound", "gpu_util_mean", "peak_mem_gb", "cpu_decoded", "bottleneck", "phases_pct", "step_p50_s",
           "step_p90_s", "achievable_tflops", "mfu_achievable", "status")
# where a step goes, as one cell without spaces: data wait, copy, forward, backward (or both merged), all-reduce,
# optimizer, other, in percent of the step (absent phases are left out: the run's phases.note says why)
PHASE_SHORT = (("data_wait", "wait"), ("host_to_device", "h2d"), ("forward", "fwd"), ("backward", "bwd"),
               ("forward_backward", "fb"), ("all_reduce", "ar"), ("optimizer", "opt"), ("other", "oth"))


def _fmt(value, digits: int = 1) -> str:
    return "-" if value is None else (f"{value:.{digits}f}" if isinstance(value, float) else str(value))


def _mean_series(client, run_id: str, suffix: str) -> float | None:
    """Mean over a run of every `system/gpu_{i}_<suffix>` series (MLflow's GPU metric names)."""
    keys = [k for k in client.get_run(run_id).data.metrics if k.startswith("system/gpu_") and k.endswith(suffix)]
    values = [m.value for k in keys for m in client.get_metric_history(run_id, k)]
    return statistics.mean(values) if values else None


def phases_cell(metrics: dict) -> str:
    """`wait3/h2d0/fwd40/bwd50/opt5/oth2`: the run's train_phase_<phase>_fraction, in percent."""
    cells = [f"{short}{100 * metrics[f'train_phase_{phase}_fraction']:.0f}" for phase, short in PHASE_SHORT
             if f"train_phase_{phase}_fraction" in metrics]
    return "/".join(cells) or "-"


def row(name: str, workers: str, decode: str, rc: str) -> str:
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    experiment = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id], f"tags.`mlflow.runName` = '{name}'") if experiment else []
    if not runs:
        return "\t".join([workers, decode] + ["-"] * (len(COLUMNS) - 3) + [f"no run (rc={rc})"])
    run = runs[0]
    if run.info.status == "RUNNING":  # the time budget killed it: never leave it RUNNING
        client.set_tag(run.info.run_id, "error", "killed by scripts/device-check.sh (time budget)")
        client.set_terminated(run.info.run_id, "FAILED")
    run = client.get_run(run.info.run_id)
    m, t = run.data.metrics, run.data.tags
    cells = [workers, decode, t.get("data_loader", "-"), t.get("decode", "-"), _fmt(m.get("train_samples_per_second")),
             _fmt(m.get("train_samples_per_second_per_device")), _fmt(m.get("dataloader_wait_fraction"), 3),
             t.get("input_bound", "-"), _fmt(_mean_series(client, run.info.run_id, "_utilization_percentage")),
             _fmt(m.get("device_peak_memory_gb"), 2), _fmt(m.get("data_loader_cpu_decoded_images"), 0),
             t.get("bottleneck", "-"), phases_cell(m), _fmt(m.get("train_step_seconds_p50"), 3),
             _fmt(m.get("train_step_seconds_p90"), 3), _fmt(m.get("device_achievable_tflops"), 3),
             _fmt(m.get("train_mfu_achievable"), 3), f"{run.info.status} rc={rc}"]
    return "\t".join(cells)


def table(path: str) -> str:
    rows = [line.rstrip("\n").split("\t") for line in open(path, encoding="utf-8") if line.strip()]
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(r, widths)) for r in rows)


def agreement() -> str:
    """Mean |nvJPEG - CPU path| in normalized units over the sample set's training images (large: 294 px)."""
    import torch

    if not torch.cuda.is_available():
        return "nvjpeg_vs_cpu: skipped (no CUDA device)"
    from bridgetower_mlflow.accelerators.cuda.nvjpeg import decode_on_gpu
    from bridgetower_mlflow.data.cpu_images import ImageSpec, normalize_batch, resize_center_crop
    from bridgetower_mlflow.data.device_decode.image_ops import DeviceImageOps
    from bridgetower_mlflow.data.sample import generate_sample_set

    image, device = ImageSpec(294), torch.device("cuda", 0)
    paths = sorted((generate_sample_set() / "train").glob("*.jpg"))[:64]
    ops, diffs = DeviceImageOps(image, device), []
    for path in paths:
        data = torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.uint8)
        gpu = ops.normalize(ops.crop_resize(decode_on_gpu([data], device)))[0].cpu()
        cpu = normalize_batch(torch.from_numpy(resize_center_crop(str(path), image.size)).unsqueeze(0),
                              image.mean, image.std)[0]
        diffs.append(float((gpu - cpu).abs().mean()))
    return (f"nvjpeg_vs_cpu: {len(diffs)} images at {image.size} px, mean |diff| {statistics.mean(diffs):.4f} "
            f"(worst image {max(diffs):.4f}) normalized units")


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    if command == "header":
        print("\t".join(COLUMNS))
    elif command == "skipped":
        print("\t".join([*arguments[:2]] + ["-"] * (len(COLUMNS) - 3) + ["skipped (time budget)"]))
    elif command == "row":
        print(row(*arguments))
    elif command == "table":
        print(table(arguments[0]))
    elif command == "agreement":
        print(agreement())
    else:
        raise SystemExit(f"unknown command {command!r}; allowed: header, row, skipped, table, agreement")
