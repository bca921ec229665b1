"""Images of any size, from 1x1 up, decode on every path, upscaled (shorter edge to the model's size, then the
center crop) as the study's Resize([size]) + CenterCrop does; a StopIteration never ends an epoch silently.

Before: a JPEG narrower or shorter than the model's input raised StopIteration in the OpenCV path; inside a
DataLoader that ended the epoch at the batch holding it (no error, the run FINISHED), and the evaluation scorer
crashed with a StopIteration traceback. Real New Yorker images vary in size and Hub sets hold thumbnails.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from mlflow.tracking import MlflowClient
from PIL import Image

from bridgetower_mlflow.data import cpu_images
from bridgetower_mlflow.data.collate import collate_batch
from bridgetower_mlflow.data.cpu_images import CLIP_MEAN, CLIP_STD, ImageSpec, ImageTransform, resize_center_crop
from bridgetower_mlflow.data.device_decode.image_ops import DeviceImageOps
from bridgetower_mlflow.data.device_decode.sources import JpegBytesCollate
from bridgetower_mlflow.data.sample import generate_sample_set
from bridgetower_mlflow.data.study_images import StudyImageTransform, study_pixels
from bridgetower_mlflow.errors import DataError
from bridgetower_mlflow.telemetry.steps.loader_wait import TimedLoader

from tests.conftest import no_running_runs, run_cli
from tests.data.test_image_backend import reference as study_reference

SIZE = 64  # the tiny preset's input
# (width, height): a pixel, slivers both ways, thumbnails, one pixel short, exact, larger than the input
SIZES = [(1, 1), (2, 3), (7, 5), (40, 30), (63, 64), (1, 300), (300, 1), (64, 64), (65, 200), (500, 400)]
# normalized units (1 gray level ~ 0.015), against each path's own kernel: measured at most 0.007 mean and
# 0.16 max (the JPEG's own loss on a 2x3 image). The old device geometry (central square, then resize) was
# 0.56 mean off on the 2x3 thumbnail: its half-pixel shift is 16 output pixels there.
MEAN_BOUND, MAX_BOUND = 0.02, 0.2


def smooth_image(width: int, height: int) -> Image.Image:
    """A diagonal color gradient: every size has content a geometry error would move."""
    x = np.linspace(0, 1, width)[None, :, None]
    y = np.linspace(0, 1, height)[:, None, None]
    rgb = np.concatenate([x + 0 * y, y + 0 * x, (x + y) / 2], axis=2)
    return Image.fromarray((rgb * 255).round().astype(np.uint8), "RGB")


def pil_reference(path) -> np.ndarray:
    """torchvision's Resize([size], BICUBIC) + CenterCrop(size) + Normalize on a PIL image (PIL's kernel,
    a=-0.5, antialiased): the reference of the Pillow path and of the device ops."""
    image = Image.open(path).convert("RGB")
    w, h = image.size
    new_w, new_h = (SIZE, int(SIZE * h / w)) if w <= h else (int(SIZE * w / h), SIZE)
    image = image.resize((new_w, new_h), Image.BICUBIC)
    top, left = int(round((new_h - SIZE) / 2.0)), int(round((new_w - SIZE) / 2.0))
    pixels = np.asarray(image.crop((left, top, left + SIZE, top + SIZE)), np.float32) / 255.0
    return ((pixels - np.float32(CLIP_MEAN)) / np.float32(CLIP_STD)).transpose(2, 0, 1)


def cubic_reference(path) -> np.ndarray:
    """The study's transform written from its definition (Keys' cubic a=-0.75, no antialias): the study path's
    reference, and OpenCV's when it upscales (its INTER_CUBIC is the same kernel)."""
    return study_reference(path, SIZE).astype(np.float32)


def fast_reference(path) -> np.ndarray:
    upscaled = min(Image.open(path).size) < SIZE
    return cubic_reference(path) if path.suffix == ".jpg" and upscaled else pil_reference(path)


def normalized(pixels_hwc: np.ndarray) -> np.ndarray:
    return cpu_images.normalize_batch(torch.from_numpy(np.ascontiguousarray(pixels_hwc)[None]))[0].numpy()


def assert_close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    diff = np.abs(got - want)
    assert got.shape == want.shape == (3, SIZE, SIZE), (what, got.shape)
    assert diff.mean() < MEAN_BOUND and diff.max() < MAX_BOUND, (what, float(diff.mean()), float(diff.max()))


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """Each size as a quality-95 JPEG (the fast path's) and a PNG (always Pillow's)."""
    folder = tmp_path_factory.mktemp("sizes")
    made = []
    for width, height in SIZES:
        image = smooth_image(width, height)
        for suffix, options in (("jpg", {"quality": 95}), ("png", {})):
            path = folder / f"{width}x{height}.{suffix}"
            image.save(path, **options)
            made.append(path)
    return made


@pytest.mark.parametrize("backend", ["opencv", "pillow"])
def test_every_size_decodes_on_the_fast_and_the_pillow_path(images, backend, monkeypatch):
    if backend == "opencv":
        pytest.importorskip("cv2")
    monkeypatch.setattr(cpu_images, "BACKEND", backend)
    for path in images:
        pixels = resize_center_crop(path, SIZE)
        assert pixels.dtype == np.uint8 and pixels.shape == (SIZE, SIZE, 3), path.name
        want = fast_reference(path) if backend == "opencv" else pil_reference(path)
        assert_close(normalized(pixels), want, f"{backend} {path.name}")
        assert np.array_equal(pixels, resize_center_crop(path.read_bytes(), SIZE)), path.name


def test_every_size_decodes_on_the_study_path(images):
    for path in images:
        pixels = study_pixels(path, ImageSpec(SIZE))
        assert pixels.dtype == np.float32 and pixels.flags["C_CONTIGUOUS"], path.name
        assert_close(pixels, cubic_reference(path), f"study {path.name}")


def test_every_size_decodes_on_the_device_image_ops(images):
    """The on-device loaders' crop + resize (nvJPEG's, and the CPU fallback it moves over), on the CPU here."""
    ops = DeviceImageOps(ImageSpec(SIZE), "cpu")
    decoded = [torch.from_numpy(np.array(Image.open(path).convert("RGB"))).permute(2, 0, 1).contiguous()
               for path in images]
    batch = ops.normalize(ops.crop_resize(decoded))
    assert batch.shape == (len(images), 3, SIZE, SIZE)
    for path, got in zip(images, batch.numpy()):
        assert_close(got, pil_reference(path), f"device ops {path.name}")


def test_the_device_loaders_byte_collate_takes_every_size(images):
    collated = JpegBytesCollate("image")([{"image": {"bytes": None, "path": str(path)}, "input_ids": [0, 2],
                                           "attention_mask": [1, 1]} for path in images])
    assert len(collated["jpegs"]) == len(images)
    assert collated["on_device"] == [path.suffix == ".jpg" for path in images]


def test_the_scorer_scores_every_size(images, cache_dir):
    """Evaluation's caption matching and the served model decode through the Scorer."""
    from bridgetower_mlflow.model.load import load_model
    from bridgetower_mlflow.model.scoring import Scorer

    loaded = load_model("tiny", 16, seed=0)
    assert loaded.image.size == SIZE
    scorer = Scorer(loaded.model.eval(), loaded.tokenizer, loaded.image, 16)
    for path in images:
        scores = scorer.score(str(path), ["a cat on the left", "a dog in the middle"])
        assert scores.shape == (2,) and np.isfinite(scores).all(), path.name


@pytest.fixture(scope="module")
def mixed_folder(tmp_path_factory):
    """The sample set's imagefolder layout, every other image (train and validation) replaced by one of SIZES."""
    folder = generate_sample_set(tmp_path_factory.mktemp("mixed") / "sample", sizes={"train": 24, "validation": 4},
                                 seed=5)
    copy = tmp_path_factory.mktemp("mixed-copy") / "set"
    shutil.copytree(folder, copy)
    for split in ("train", "validation"):
        rows = [json.loads(line) for line in (copy / split / "metadata.jsonl").read_text().splitlines()]
        for row, (width, height) in zip(rows[::2], SIZES):
            source = Image.open(copy / split / row["file_name"])
            source.resize((width, height), Image.BICUBIC).save(copy / split / row["file_name"], quality=90)
    return copy


def _load_train_split(folder, transform):
    import datasets

    train = datasets.load_dataset("imagefolder", data_dir=str(folder), split="train")
    train = train.cast_column("image", datasets.Image(decode=False))
    train = train.map(lambda row: {"input_ids": [0, 5, 2], "attention_mask": [1, 1, 1]})
    return train.with_transform(transform)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("backend", ["fast", "study"])
def test_a_dataset_of_mixed_sizes_gives_every_row_in_an_epoch(mixed_folder, workers, backend):
    """Before: the epoch ended at the first batch holding a small JPEG (2 of 6 batches here), silently."""
    transform = ImageTransform("image", SIZE) if backend == "fast" else StudyImageTransform("image", ImageSpec(SIZE))
    train = _load_train_split(mixed_folder, transform)
    loader = TimedLoader(torch.utils.data.DataLoader(train, batch_size=4, num_workers=workers,
                                                     collate_fn=collate_batch))
    rows = sum(len(batch["pixel_values"]) for batch in loader)
    assert rows == len(train) == 24 and loader.batches == 6


class _DecoderThatStops(ImageTransform):
    """A decoder bug of the kind that hid small images: a bare StopIteration out of one image's decode."""

    def pixels(self, source):
        if "0003" in str(source.get("path")):
            raise StopIteration
        return super().pixels(source)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stop_iteration_in_a_transform_is_a_decode_error_naming_the_image(mixed_folder, workers):
    train = _load_train_split(mixed_folder, _DecoderThatStops("image", SIZE))
    loader = TimedLoader(torch.utils.data.DataLoader(train, batch_size=4, num_workers=workers,
                                                     collate_fn=collate_batch))
    with pytest.raises(DataError, match=r"0003\.jpg: cannot decode \(StopIteration"):
        list(loader)


class _StopsWhenRead(list):
    def __iter__(self):
        raise StopIteration

    def __len__(self):
        raise StopIteration


def test_a_stop_iteration_in_collate_is_an_error_not_the_end_of_the_data():
    good = {"pixels": np.zeros((SIZE, SIZE, 3), np.uint8), "input_ids": [0, 2], "attention_mask": [1, 1]}
    collated = collate_batch([good, {**good, "input_ids": _StopsWhenRead([0, 2])}])
    assert list(collated) == ["image_errors"] and "StopIteration" in collated["image_errors"][0]


class _Unreadable(dict):
    def get(self, key, default=None):
        if key == "bytes":
            raise StopIteration
        return super().get(key, default)


def test_a_stop_iteration_in_the_device_loaders_collate_names_the_image():
    with pytest.raises(DataError, match=r"cartoons/7\.jpg: cannot read \(StopIteration"):
        JpegBytesCollate("image")([{"image": _Unreadable(path="cartoons/7.jpg"), "input_ids": [0],
                                    "attention_mask": [1]}])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["fast", "study"])
def test_a_run_on_a_set_of_mixed_sizes_trains_every_step_and_evaluates(mixed_folder, backend, cache_dir, sqlite_uri,
                                                                        tmp_path):
    """As a user meets it. Before: on the fast path the epoch ended at the first batch with a small JPEG (0 steps,
    a FAILED run blaming max_steps); with the study's transform, training ran and the evaluation's scorer
    (the fast path) crashed with a StopIteration traceback."""
    done = run_cli(["train", "--dataset", str(mixed_folder), "--image-backend", backend, "--max-steps", "8",
                    "--per-device-train-batch-size", "4", "--dataloader-num-workers", "0", "--logging-steps", "1",
                    "--throughput-warmup-steps", "1", "--log-model", "false", "--output-dir", str(tmp_path / "out"),
                    "--experiment-name", "mixed-sizes"], timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(sqlite_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("mixed-sizes").experiment_id])
    assert run.info.status == "FINISHED" and no_running_runs(sqlite_uri) == []
    # 24 rows in batches of 4: 6 an epoch, so step 8 is in the second epoch, every batch of both taken
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "loss")) == list(range(1, 9))
    assert "eval_loss" in run.data.metrics and "eval_caption_match_accuracy" in run.data.metrics
