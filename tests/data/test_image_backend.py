"""image_backend=study: the optimum-habana example's transform (no antialias, float, per image), checked
against an independent numpy cubic convolution; recorded as data_loader=torch-cpu-study in a real run."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from mlflow.tracking import MlflowClient
from PIL import Image

from bridgetower_mlflow.contract import CPU_STUDY_LOADER
from bridgetower_mlflow.data.collate import collate_batch
from bridgetower_mlflow.data.cpu_images import (
    CLIP_MEAN,
    CLIP_STD,
    ImageSpec,
    cpu_loader_name,
    normalize_batch,
    resize_center_crop,
)
from bridgetower_mlflow.data.sample import generate_sample_set
from bridgetower_mlflow.data.study_images import StudyImageTransform, study_pixels

from tests.conftest import no_running_runs, run_cli

SIZE = 288


def cubic_matrix(n_in: int, n_out: int, a: float = -0.75) -> np.ndarray:
    """Keys' cubic (a=-0.75), half-pixel centres, edge-clamped taps, kernel not widened (no antialias)."""
    weights, scale = np.zeros((n_out, n_in)), n_in / n_out
    for o in range(n_out):
        src = (o + 0.5) * scale - 0.5
        first = int(np.floor(src))
        for k in range(-1, 3):
            d = abs(src - first - k)
            w = (a + 2) * d**3 - (a + 3) * d**2 + 1 if d <= 1 else a * d**3 - 5 * a * d**2 + 8 * a * d - 4 * a
            weights[o, min(max(first + k, 0), n_in - 1)] += w
    return weights


def reference(path, size: int = SIZE) -> np.ndarray:
    """Shorter edge to size, center crop, /255, CLIP normalize: float64, written from the definitions."""
    img = np.asarray(Image.open(path).convert("RGB"), np.float64) / 255
    h, w = img.shape[:2]
    nh, nw = (size, int(size * w / h)) if h <= w else (int(size * h / w), size)
    top, left = round((nh - size) / 2), round((nw - size) / 2)
    rows, cols = cubic_matrix(h, nh)[top:top + size], cubic_matrix(w, nw)[left:left + size]
    out = np.stack([rows @ img[:, :, c] @ cols.T for c in range(3)])
    return (out - np.array(CLIP_MEAN)[:, None, None]) / np.array(CLIP_STD)[:, None, None]


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    folder = generate_sample_set(tmp_path_factory.mktemp("study") / "sample", sizes={"train": 2}, seed=3)
    return sorted((folder / "train").glob("*.jpg"))


def test_study_pixels_are_the_reference_transform(jpegs):
    for path in jpegs:
        pixels = study_pixels(path, ImageSpec(SIZE))
        assert pixels.shape == (3, SIZE, SIZE) and pixels.dtype == np.float32 and pixels.flags["C_CONTIGUOUS"]
        assert np.abs(pixels - reference(path)).max() < 1e-3  # float32 accumulation: measured <= 2.6e-4


def test_study_resamples_differently_from_fast_but_agrees_in_mean(jpegs):
    study = study_pixels(jpegs[0], ImageSpec(SIZE))
    fast = normalize_batch(torch.from_numpy(resize_center_crop(jpegs[0], SIZE)[None]))[0].numpy()
    assert np.abs(study - fast).mean() > 0.02  # measured 0.038-0.049: aliased bicubic vs antialiased
    assert abs(study.mean() - fast.mean()) < 0.05  # measured <= 0.014


def test_grayscale_becomes_three_equal_channels(jpegs, tmp_path):
    gray = tmp_path / "gray.jpg"
    Image.open(jpegs[0]).convert("L").save(gray, quality=90)
    pixels = study_pixels(gray, ImageSpec(64))
    raw = pixels * np.float32(CLIP_STD)[:, None, None] + np.float32(CLIP_MEAN)[:, None, None]
    assert np.abs(raw[0] - raw[1]).max() < 1e-5 and np.abs(raw[1] - raw[2]).max() < 1e-5


def test_study_rows_collate_to_float_nchw_and_the_tag_differs(jpegs):
    rows = StudyImageTransform("image", ImageSpec(64))({"image": [str(p) for p in jpegs],
                                                         "input_ids": [[1, 2]] * 2, "attention_mask": [[1, 1]] * 2})
    batch = collate_batch([{k: rows[k][i] for k in rows} for i in range(2)])
    assert batch["pixel_values"].dtype == torch.float32 and batch["pixel_values"].shape == (2, 3, 64, 64)
    assert cpu_loader_name("study") == CPU_STUDY_LOADER != cpu_loader_name("fast")


def test_bogus_image_backend_is_one_line(tmp_path):
    done = run_cli(["train", "--image-backend", "bogus"])
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == ["error: image_backend: invalid value 'bogus'; allowed: fast, study"]


@pytest.mark.slow
def test_a_study_run_records_its_loader_and_param(cache_dir, sqlite_uri):
    done = run_cli(["train", "--image-backend", "study", "--max-steps", "2", "--throughput-warmup-steps", "1",
                    "--logging-steps", "1", "--per-device-train-batch-size", "4", "--dataloader-num-workers", "0",
                    "--log-model", "false", "--max-eval-samples", "8", "--experiment-name", "study"])
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(sqlite_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("study").experiment_id])
    assert run.info.status == "FINISHED" and no_running_runs(sqlite_uri) == []
    assert run.data.tags["data_loader"] == CPU_STUDY_LOADER and run.data.params["image_backend"] == "study"
