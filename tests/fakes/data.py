"""Tiny on-disk JPEG datasets in the shape the loaders receive (Image(decode=False) + token ids)."""

from __future__ import annotations

import numpy as np


def make_jpeg_dataset(folder, sizes=((64, 48), (40, 80), (64, 48), (33, 33), (50, 70)), seq_len=8,
                      fmt="JPEG", in_memory=False):
    """A datasets.Dataset whose `image` column is {'bytes': None, 'path': file} (or bytes only)."""
    import datasets
    from PIL import Image

    rng = np.random.default_rng(0)
    images = []
    for index, (width, height) in enumerate(sizes):
        path = folder / f"img{index}.{fmt.lower()}"
        pixels = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(path, format=fmt, quality=95)
        images.append({"bytes": path.read_bytes(), "path": None} if in_memory else {"bytes": None, "path": str(path)})
    ids = [[index + 1] * seq_len for index in range(len(sizes))]
    masks = [[1] * (seq_len - 2) + [0, 0] for _ in sizes]
    dataset = datasets.Dataset.from_dict({"image": images, "input_ids": ids, "attention_mask": masks})
    return dataset.cast_column("image", datasets.Image(decode=False))


def pil_reference(path_or_bytes, size, mean, std):
    """The CPU path's meaning: central square, bicubic to size, then (x/255 - mean)/std; (3,H,W)."""
    import io

    from PIL import Image

    source = io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else path_or_bytes
    image = Image.open(source).convert("RGB")
    width, height = image.size
    side = min(width, height)
    left, top = (width - side) // 2, (height - side) // 2
    pixels = np.asarray(image.resize((size, size), Image.BICUBIC, box=(left, top, left + side, top + side)))
    pixels = pixels.astype(np.float32) / 255.0
    return ((pixels - np.array(mean, np.float32)) / np.array(std, np.float32)).transpose(2, 0, 1)
