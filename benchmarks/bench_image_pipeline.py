"""CPU image preprocessing per core: our pipeline vs transformers' BridgeTowerImageProcessor.

On ~200 contest-sized JPEGs (the sample generator's line drawings, 600-1000 px sides, cached), pinned
to one core with one torch (and OpenCV) thread, methods interleaved over the repetitions, the first
round discarded, median images/s of wall time (and of the thread's CPU time, steadier while other jobs
share the core):

- processor: BridgeTowerImageProcessorPil (shortest_edge = size, as modeling.py builds it) on
  Image.open().convert("RGB"), float pixel_values per image;
- habana-example: optimum-habana's contrastive example transform (full decode, bicubic resize with
  antialias of the shorter edge, center crop, float, normalize) written in torch (no torchvision);
- ours: data/cpu_images.resize_center_crop to uint8 HWC, batch by batch, plus the collate stack
  and the CPU normalize_batch of each batch (what the trainer pays for it when the device is the CPU;
  with an accelerator the normalize runs there);
- ours-worker: the data-loader worker's part alone (decode + resize + crop to uint8);
- decode-floor: Pillow draft decode only (DCT-scaled), the floor for any Pillow-based pipeline.

Last line: ratio=<ours / processor> (wall time). Not a test.

    .venv/bin/python benchmarks/bench_image_pipeline.py [--images 200] [--repeats 7] [--size 288] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

BATCH = 32


def sample_jpegs(count: int) -> list[Path]:
    """`count` contest-like JPEGs, generated once into the cache."""
    from bridgetower_mlflow.data.sample import default_sample_dir, generate_sample_set

    folder = default_sample_dir().parent / f"bench-images-{count}"
    generate_sample_set(folder, sizes={"train": count}, seed=7)
    return sorted((folder / "train").glob("*.jpg"))


def pin_one_core() -> None:
    import torch

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    torch.set_num_threads(1)


def make_processor(size: int):
    from transformers.models.bridgetower import BridgeTowerImageProcessorPil

    from bridgetower_mlflow.data.cpu_images import CLIP_MEAN, CLIP_STD

    # crop_size must be {"shortest_edge": n}: this processor ignores height/width there (5.24 fails on them)
    return BridgeTowerImageProcessorPil(size={"shortest_edge": size}, crop_size={"shortest_edge": size},
                                        image_mean=list(CLIP_MEAN), image_std=list(CLIP_STD))


def run_processor(paths, size, processor):
    from PIL import Image

    for path in paths:
        processor(Image.open(path).convert("RGB"), return_tensors="pt")


def habana_example_transform(image, size: int, mean, std):
    """optimum-habana run_bridgetower.py's Transform: Resize([size], BICUBIC, antialias), CenterCrop,
    ConvertImageDtype(float), Normalize, on a CHW uint8 tensor (what read_image returns)."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(np.array(image)).permute(2, 0, 1).unsqueeze(0).float()
    h, w = x.shape[-2:]
    nh, nw = (size, int(size * w / h)) if h <= w else (int(size * h / w), size)
    x = F.interpolate(x, size=(nh, nw), mode="bicubic", antialias=True, align_corners=False)
    x = x.round_().clamp_(0, 255)  # torchvision keeps uint8 through Resize
    top, left = (nh - size) // 2, (nw - size) // 2
    x = x[0, :, top:top + size, left:left + size] / 255.0
    m, s = torch.tensor(mean).view(3, 1, 1), torch.tensor(std).view(3, 1, 1)
    return (x - m) / s


def run_habana(paths, size, mean, std):
    from PIL import Image

    for path in paths:
        habana_example_transform(Image.open(path).convert("RGB"), size, mean, std)


def run_ours(paths, size):
    import numpy as np
    import torch

    from bridgetower_mlflow.data.cpu_images import normalize_batch, resize_center_crop

    for start in range(0, len(paths), BATCH):  # batch by batch, as the loader hands them to the trainer
        pixels = [resize_center_crop(path, size) for path in paths[start:start + BATCH]]
        normalize_batch(torch.from_numpy(np.stack(pixels)))


def run_worker_part(paths, size):
    from bridgetower_mlflow.data.cpu_images import resize_center_crop

    for path in paths:
        resize_center_crop(path, size)


def run_floor(paths, size):
    from PIL import Image

    for path in paths:
        image = Image.open(path)
        image.draft("RGB", (size, size))
        image.load()


def measure(methods: dict, repeats: int, count: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median images/s per method, of wall and of CPU time; methods interleaved within each repetition."""
    wall, cpu = {name: [] for name in methods}, {name: [] for name in methods}
    for rep in range(repeats + 1):  # the first round warms caches and is discarded
        for name, fn in methods.items():
            started, started_cpu = time.perf_counter(), time.thread_time()
            fn()
            if rep:
                wall[name].append(count / (time.perf_counter() - started))
                cpu[name].append(count / (time.thread_time() - started_cpu))
    return ({name: statistics.median(v) for name, v in wall.items()},
            {name: statistics.median(v) for name, v in cpu.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--size", type=int, default=288,
                        help="model image size (presets: tiny 64, base 288, large 294)")
    parser.add_argument("--smoke", action="store_true", help="4 images, one repetition: does it still run?")
    opts = parser.parse_args()
    if opts.smoke:
        opts.images, opts.repeats = 4, 1
    from bridgetower_mlflow.data.cpu_images import BACKEND, CLIP_MEAN, CLIP_STD

    paths = sample_jpegs(opts.images)
    pin_one_core()
    processor, size = make_processor(opts.size), opts.size
    methods = {
        "processor": lambda: run_processor(paths, size, processor),
        "habana-example": lambda: run_habana(paths, size, CLIP_MEAN, CLIP_STD),
        "ours": lambda: run_ours(paths, size),
        "ours-worker": lambda: run_worker_part(paths, size),
        "decode-floor": lambda: run_floor(paths, size),
    }
    rates, cpu_rates = measure(methods, opts.repeats, len(paths))
    print(f"{len(paths)} JPEGs, size {size}, one core, {opts.repeats} interleaved repetitions, median; "
          f"JPEG backend: {BACKEND}")
    for name, rate in rates.items():
        print(f"  {name:15s} {rate:8.1f} img/s   x{rate / rates['processor']:.2f} vs processor"
              f"   (CPU time: {cpu_rates[name]:7.1f} img/s, x{cpu_rates[name] / cpu_rates['processor']:.2f})")
    for label, r in (("wall", rates), ("CPU time", cpu_rates)):
        floor = r["decode-floor"]
        print(f"{label}: ours reaches {r['ours'] / floor:.0%} of the draft-decode floor "
              f"(worker part alone: {r['ours-worker'] / floor:.0%})")
    print(f"ratio={rates['ours'] / rates['processor']:.2f}")


if __name__ == "__main__":
    main()
