"""image_backend fast vs study: samples/s per core of the data-loader worker's part, side by side.

The worker's part of each backend on the sample generator's contest-like JPEGs (cached), one core
(`sched_setaffinity`, one torch and OpenCV thread, as in a DataLoader worker): `fast` is
data/cpu_images.resize_center_crop to uint8 (its normalize runs once per batch on the device);
`study` is data/study_images.study_pixels (full decode, float, aliased bicubic, normalize per image).
Backends interleaved over the repetitions, the first discarded, median samples/s of wall time, at
the tiny (64) and base (288) image sizes. Last line: ratio=<fast / study at 288>. Not a test.

    .venv/bin/python benchmarks/bench_image_backends.py [--images 60] [--repeats 5] [--smoke]
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench_image_pipeline import pin_one_core, sample_jpegs


def rates(paths, size: int, repeats: int) -> dict[str, float]:
    from bridgetower_mlflow.data.cpu_images import ImageSpec, resize_center_crop
    from bridgetower_mlflow.data.study_images import study_pixels

    spec = ImageSpec(size)
    backends = {"fast": lambda p: resize_center_crop(p, size), "study": lambda p: study_pixels(p, spec)}
    seen: dict[str, list[float]] = {name: [] for name in backends}
    for rep in range(repeats + 1):
        for name, fn in backends.items():
            started = time.perf_counter()
            for path in paths:
                fn(path)
            if rep:
                seen[name].append(len(paths) / (time.perf_counter() - started))
    return {name: statistics.median(v) for name, v in seen.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="4 images, one repetition: does it still run?")
    opts = parser.parse_args()
    if opts.smoke:
        opts.images, opts.repeats = 4, 1
    paths = sample_jpegs(opts.images)
    pin_one_core()
    ratio = 0.0
    print(f"{len(paths)} JPEGs, one core, {opts.repeats} interleaved repetitions, median samples/s")
    for size in (64, 288):
        r = rates(paths, size, opts.repeats)
        ratio = r["fast"] / r["study"]
        print(f"  {size:3d} px  fast {r['fast']:7.1f}  study {r['study']:7.1f}  fast/study x{ratio:.2f}")
    print(f"ratio={ratio:.2f}")


if __name__ == "__main__":
    main()
