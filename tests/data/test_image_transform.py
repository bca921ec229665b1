"""The CPU image path against the reference transform, on real sample JPEGs, PNG and grayscale.

Reference: full decode, shorter edge to `size` with antialiased bicubic (Pillow's BICUBIC, the
resize torchvision's Resize([size]) and the optimum-habana example use), center crop with
torchvision's rounding, CLIP normalize. Units below are normalized units (1 gray level ~ 0.015).

Tolerances, JPEG (decoded at 1/2 scale by libjpeg's DCT scaling: OpenCV's reduced decode, blur and
cubic; Pillow's `draft` and torch's antialiased bicubic in the fallback), both preset sizes:
- mean |diff| < 0.05: measured 0.021 on average (fallback 0.018), 0.041 at worst over the 10 images
  here; over a set the issue bounds the average at 0.03 (SET_MEAN; 0.027 over the benchmark's 200);
- 99th percentile < 1.25: measured <= 0.92 here;
- max < 2.46, 60% of the full normalized span (~4.11): the drafted decode moves 1-2 px pen lines
  partway between ink and paper (measured max 1.85 here, 2.31 over the benchmark's 200), but a
  pixel never flips from ink to paper; a geometry, channel or normalization bug would break the
  mean bound by far.
Lossless sources (PNG) are not drafted and take the Pillow path: torch's uint8 antialiased bicubic
is Pillow's kernel, so the bound is 2 gray levels per pixel (measured 1).
"""

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch.overrides import TorchFunctionMode

from bridgetower_mlflow.contract import CPU_LOADER, CPU_PILLOW_LOADER
from bridgetower_mlflow.data import cpu_images as image_transform
from bridgetower_mlflow.data.collate import collate_batch
from bridgetower_mlflow.data.cpu_images import (
    CLIP_MEAN,
    CLIP_STD,
    ImageDecodeError,
    ImageTransform,
    cpu_loader_name,
    normalize_batch,
    resize_center_crop,
)
from bridgetower_mlflow.data.sample import generate_sample_set
from bridgetower_mlflow.data.study_images import decode_like_study

REPO = Path(__file__).resolve().parents[2]
SIZE, LARGE = 288, 294  # the base and the large preset's image sizes
SET_MEAN = 0.03  # the issue's bound on the mean difference over a set of JPEGs
SPAN = (1 - min(CLIP_MEAN)) / min(CLIP_STD) + max(CLIP_MEAN) / min(CLIP_STD)
JPEG_MEAN, JPEG_P99, JPEG_MAX = 0.05, 1.25, 0.6 * SPAN
LOSSLESS_MAX = 2 / 255 / min(CLIP_STD)


def reference(image: Image.Image, size: int = SIZE) -> np.ndarray:
    """Resize([size], BICUBIC) + CenterCrop(size) + Normalize, as torchvision does it on PIL images."""
    image = image.convert("RGB")
    w, h = image.size
    new_w, new_h = (size, int(size * h / w)) if w <= h else (int(size * w / h), size)
    image = image.resize((new_w, new_h), Image.BICUBIC)
    top, left = int(round((new_h - size) / 2.0)), int(round((new_w - size) / 2.0))
    pixels = np.asarray(image.crop((left, top, left + size, top + size)), dtype=np.float32) / 255.0
    return ((pixels - np.float32(CLIP_MEAN)) / np.float32(CLIP_STD)).transpose(2, 0, 1)


def ours(source, size: int = SIZE) -> np.ndarray:
    pixels = resize_center_crop(source, size)
    assert pixels.dtype == np.uint8 and pixels.shape == (size, size, 3) and pixels.flags["C_CONTIGUOUS"]
    return normalize_batch(torch.from_numpy(pixels[None]))[0].numpy()


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    folder = generate_sample_set(tmp_path_factory.mktemp("img") / "sample", sizes={"train": 10}, seed=3)
    return sorted((folder / "train").glob("*.jpg"))


def pick(paths, portrait: bool):
    for path in paths:
        w, h = Image.open(path).size
        if (h > w) == portrait and w != h:
            return path
    pytest.fail(f"no {'portrait' if portrait else 'landscape'} image in the sample")


def assert_jpeg_close(got, want):
    diff = np.abs(got - want)
    assert diff.mean() < JPEG_MEAN, diff.mean()
    assert np.percentile(diff, 99) < JPEG_P99, np.percentile(diff, 99)
    assert diff.max() < JPEG_MAX, diff.max()


@pytest.mark.parametrize("portrait", [False, True], ids=["landscape", "portrait"])
def test_sample_jpeg_matches_reference(jpegs, portrait):
    path = pick(jpegs, portrait)
    assert_jpeg_close(ours(path), reference(Image.open(path)))


def test_every_sample_jpeg_and_source_kind_agree(jpegs):
    for path in jpegs:
        want = reference(Image.open(path))
        assert_jpeg_close(ours(path), want)
        assert_jpeg_close(ours({"bytes": path.read_bytes(), "path": str(path)}), want)


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L"])
def test_png_is_the_reference_within_two_gray_levels(jpegs, tmp_path, mode):
    path = tmp_path / f"image-{mode}.png"
    Image.open(jpegs[0]).convert(mode).save(path)
    diff = np.abs(ours(path) - reference(Image.open(path)))
    assert diff.max() <= LOSSLESS_MAX + 1e-6, diff.max()


def test_grayscale_jpeg_matches_reference(jpegs, tmp_path):
    path = tmp_path / "gray.jpg"
    Image.open(pick(jpegs, portrait=True)).convert("L").save(path, quality=90)
    got = ours(path)
    assert_jpeg_close(got, reference(Image.open(path)))
    assert np.allclose(got[0] * CLIP_STD[0] + CLIP_MEAN[0], got[2] * CLIP_STD[2] + CLIP_MEAN[2], atol=1e-5)


def test_small_image_is_upscaled_to_the_model_size(tmp_path):
    path = tmp_path / "small.png"
    Image.radial_gradient("L").resize((200, 150)).save(path)
    diff = np.abs(ours(path) - reference(Image.open(path)))
    assert diff.max() <= LOSSLESS_MAX + 1e-6


def test_normalize_batch_is_contiguous_nchw_clip_normalization():
    pixels = torch.randint(0, 256, (2, 5, 4, 3), dtype=torch.uint8)
    got = normalize_batch(pixels)
    want = (pixels.permute(0, 3, 1, 2).float() / 255 - torch.tensor(CLIP_MEAN).view(1, 3, 1, 1)) \
        / torch.tensor(CLIP_STD).view(1, 3, 1, 1)
    assert got.is_contiguous() and got.shape == (2, 3, 5, 4)
    assert torch.allclose(got, want, atol=1e-5)


def test_truncated_jpeg_raises_naming_the_file(jpegs, tmp_path):
    path = tmp_path / "truncated.jpg"
    path.write_bytes(jpegs[0].read_bytes()[:2000])
    with pytest.raises(ImageDecodeError, match="truncated.jpg"):
        resize_center_crop(path, SIZE)


def test_garbage_bytes_raise_naming_the_file():
    with pytest.raises(ImageDecodeError, match="cartoons/0042.jpg"):
        resize_center_crop({"bytes": b"not an image at all", "path": "cartoons/0042.jpg"}, SIZE)
    with pytest.raises(ImageDecodeError, match="in-memory image bytes"):
        resize_center_crop(io.BytesIO(b"\xff\xd8\xff garbage").getvalue(), SIZE)


@pytest.mark.parametrize("missing", [{"bytes": None, "path": None}, {}, None], ids=["empty dict", "no keys", "None"])
def test_a_row_without_an_image_is_one_bad_image_not_a_crash(missing):
    """datasets' Image feature gives {'bytes': None, 'path': None} (or None) for a row with no image."""
    with pytest.raises(ImageDecodeError, match="no image"):
        resize_center_crop(missing, SIZE)
    with pytest.raises(ImageDecodeError, match="no image"):
        decode_like_study(missing)  # the study's image backend


def test_a_broken_image_in_a_batch_reaches_collate_as_an_error(jpegs, tmp_path):
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8\xff\xe0 nothing more")
    transform = ImageTransform("image", 64)
    batch = transform({"image": [{"bytes": None, "path": str(jpegs[0])}, {"bytes": None, "path": str(broken)}],
                       "input_ids": [[0, 2], [0, 2]], "attention_mask": [[1, 1], [1, 1]]})
    examples = [{k: v[i] for k, v in batch.items()} for i in range(2)]
    collated = collate_batch(examples)
    assert list(collated) == ["image_errors"] and "broken.jpg" in collated["image_errors"][0]


def test_a_good_batch_collates_to_uint8_nhwc(jpegs):
    transform = ImageTransform("image", 64)
    batch = transform({"image": [{"bytes": None, "path": str(p)} for p in jpegs[:2]],
                       "input_ids": [[0, 2], [0, 2]], "attention_mask": [[1, 1], [1, 1]]})
    collated = collate_batch([{k: v[i] for k, v in batch.items()} for i in range(2)])
    assert collated["pixel_values"].dtype == torch.uint8 and collated["pixel_values"].shape == (2, 64, 64, 3)


@pytest.fixture
def pillow_backend(monkeypatch):
    """The fallback, as on a machine without opencv-python-headless (or BRIDGETOWER_IMAGE_BACKEND=pillow)."""
    monkeypatch.setattr(image_transform, "BACKEND", "pillow")


@pytest.fixture
def pillow_calls(monkeypatch):
    """Counts the images that took the Pillow path (its resize)."""
    calls, real = [], image_transform._square_resize
    monkeypatch.setattr(image_transform, "_square_resize", lambda *args: calls.append(1) or real(*args))
    return calls


@pytest.mark.parametrize("size", [SIZE, LARGE])
def test_the_set_stays_within_the_issue_bound_at_both_preset_sizes(jpegs, size):
    means = []
    for path in jpegs:
        got, want = ours(path, size), reference(Image.open(path), size)
        assert_jpeg_close(got, want)  # per image: mean, 99th percentile, and no ink-to-paper flip
        means.append(np.abs(got - want).mean())
    assert np.mean(means) <= SET_MEAN, np.mean(means)


def test_opencv_decodes_jpegs_where_it_is_installed(jpegs, pillow_calls):
    pytest.importorskip("cv2")
    if os.environ.get("BRIDGETOWER_IMAGE_BACKEND", "opencv") != "opencv":
        pytest.skip("the Pillow path is forced in this environment")
    assert image_transform.BACKEND == "opencv" and cpu_loader_name() == CPU_LOADER
    with open(jpegs[0], "rb") as fh:  # a file object too
        assert np.array_equal(resize_center_crop(fh, LARGE), resize_center_crop(jpegs[0], LARGE))
    assert pillow_calls == []


def test_cmyk_jpeg_and_png_take_the_pillow_path(jpegs, tmp_path, pillow_calls):
    cmyk, png = tmp_path / "cmyk.jpg", tmp_path / "drawing.png"
    Image.open(jpegs[0]).convert("CMYK").save(cmyk, quality=90)
    Image.open(jpegs[0]).save(png)
    assert_jpeg_close(ours(cmyk, LARGE), reference(Image.open(cmyk), LARGE))
    assert np.abs(ours(png, LARGE) - reference(Image.open(png), LARGE)).max() <= LOSSLESS_MAX + 1e-6
    assert len(pillow_calls) == 2


def test_the_pillow_fallback_matches_the_reference(jpegs, pillow_backend, pillow_calls):
    for path in jpegs[:4]:
        assert_jpeg_close(ours(path, LARGE), reference(Image.open(path), LARGE))
    assert len(pillow_calls) == 4 and cpu_loader_name() == CPU_PILLOW_LOADER


def test_the_environment_variable_forces_the_pillow_fallback(jpegs, tmp_path):
    out = tmp_path / "pixels.npy"
    probe = ("import sys, numpy as np\nfrom bridgetower_mlflow.data import cpu_images as it\n"
             "print(it.BACKEND, it.cpu_loader_name())\nnp.save(sys.argv[2], it.resize_center_crop(sys.argv[1], 294))")
    done = subprocess.run([sys.executable, "-c", probe, str(jpegs[1]), str(out)], capture_output=True, text=True,
                          cwd=REPO, timeout=120, env={**os.environ, "BRIDGETOWER_IMAGE_BACKEND": "pillow"})
    assert done.stdout.split() == ["pillow", CPU_PILLOW_LOADER], done.stderr[-2000:]
    got = normalize_batch(torch.from_numpy(np.load(out)[None]))[0].numpy()
    assert_jpeg_close(got, reference(Image.open(jpegs[1]), LARGE))


def test_cpu_loader_name_says_which_path_decodes(monkeypatch):
    for backend, name in (("opencv", CPU_LOADER), ("pillow", CPU_PILLOW_LOADER)):
        monkeypatch.setattr(image_transform, "BACKEND", backend)
        assert cpu_loader_name() == name


def test_normalize_batch_cpu_paths_agree(monkeypatch):
    pixels = torch.randint(0, 256, (3, 7, 6, 3), dtype=torch.uint8)
    fast, strided = normalize_batch(pixels), normalize_batch(pixels.transpose(1, 2))
    monkeypatch.setattr(image_transform, "BACKEND", "pillow")
    assert torch.allclose(fast, normalize_batch(pixels), atol=1e-5)
    assert torch.allclose(strided, normalize_batch(pixels.transpose(1, 2).contiguous()), atol=1e-5)
    assert strided.shape == (3, 3, 6, 7) and strided.is_contiguous()
    assert normalize_batch(pixels, dtype=torch.bfloat16).dtype == torch.bfloat16


def test_a_jpeg_cut_in_half_raises_instead_of_decoding_gray(jpegs, tmp_path):
    path = tmp_path / "half.jpg"
    path.write_bytes(jpegs[0].read_bytes()[:len(jpegs[0].read_bytes()) // 2])
    with pytest.raises(ImageDecodeError, match="half.jpg"):
        resize_center_crop(path, LARGE)


class _TensorFactoryCalls(TorchFunctionMode):
    """Records every torch.tensor / as_tensor call: on a GPU each one is a blocking host-to-device copy."""

    def __init__(self):
        super().__init__()
        self.made = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.tensor, torch.as_tensor):
            self.made.append(args[0] if args else kwargs)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_normalize_batch_makes_its_constants_once_per_device_and_dtype(monkeypatch, dtype):
    """Issue 30: two torch.tensor constants per step were two blocking copies per step on a GPU."""
    monkeypatch.setattr(image_transform, "BACKEND", "pillow")  # the torch path every device takes
    pixels = torch.randint(0, 256, (2, 5, 4, 3), dtype=torch.uint8)
    first = normalize_batch(pixels, dtype=dtype)
    with _TensorFactoryCalls() as steps:
        for _ in range(3):
            again = normalize_batch(pixels, dtype=dtype)
    assert steps.made == [] and torch.equal(first, again)
    want = (pixels.permute(0, 3, 1, 2).float() / 255 - torch.tensor(CLIP_MEAN).view(1, 3, 1, 1)) \
        / torch.tensor(CLIP_STD).view(1, 3, 1, 1)
    assert again.dtype == dtype and torch.allclose(again.float(), want, atol=2e-2 if dtype == torch.bfloat16 else 1e-5)
    other_mean = normalize_batch(pixels, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), dtype=dtype)
    assert torch.allclose(other_mean.float(), pixels.permute(0, 3, 1, 2).float() / 127.5 - 1, atol=2e-2)
