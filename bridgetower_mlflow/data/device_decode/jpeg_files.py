"""A local JPEG file for every row of an image column: the Habana media pipe reads files, not bytes.

Rows with a readable local path keep it. Rows that hold their image as bytes (the Hub's parquet sets,
a save_to_disk set with an Image feature) are written once under the Hugging Face datasets cache,
<HF_DATASETS_CACHE>/bridgetower_mlflow/jpeg_files/<dataset fingerprint>-<column>/<row>.jpg: the bytes
as they are (JPEG is not re-encoded, so the pixels stay those the CPU path decodes), each through a
temporary name and a rename, so a crash or a second rank never leaves half a file under the final
name. The next run over the same dataset (same fingerprint) finds them and writes nothing.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from ...errors import DeviceDecodeUnavailable
from .sources import device_decodable, source_path

CACHE_PARTS = ("bridgetower_mlflow", "jpeg_files")
CHUNK_ROWS = 256  # rows read at a time: the bytes of a whole column need not fit in memory at once


def cache_folder(dataset, column: str) -> Path:
    """Where this dataset's byte-held images are written (keyed by its fingerprint)."""
    import datasets

    fingerprint = getattr(dataset, "_fingerprint", None)
    if not fingerprint:
        raise DeviceDecodeUnavailable("the images are held as bytes and the dataset has no fingerprint to name "
                                      "their file cache by")
    return Path(datasets.config.HF_DATASETS_CACHE, *CACHE_PARTS, f"{fingerprint}-{column}")


def local_jpeg_paths(dataset, column: str, decoder: str) -> list[str]:
    """One local JPEG path per row (byte-held images written to the cache); DeviceDecodeUnavailable otherwise."""
    folder, paths, refused = None, [], []
    raw = _undecoded(dataset, column)
    for start in range(0, len(raw), CHUNK_ROWS):
        for row, value in enumerate(raw[start:start + CHUNK_ROWS][column], start):
            path, data = source_path(value), _image_bytes(value)
            if path is not None:
                refused += [] if decodable_file(path) else [f"'{path}'"]
            elif data is None:
                raise DeviceDecodeUnavailable(
                    f"{decoder} reads image files, but row {row} of column '{column}' has neither a readable "
                    "local path nor image bytes (a remote file?)")
            elif not device_decodable(data):
                refused.append(f"row {row}")
            else:
                folder = folder or cache_folder(dataset, column)
                path = write_once(folder / f"{row:08d}.jpg", data)
            paths.append(path)
    if refused:
        raise DeviceDecodeUnavailable(f"{decoder} decodes RGB/grayscale JPEG only, and {len(refused)} of "
                                      f"{len(paths)} images are not (first: {refused[0]})")
    return [path for path in paths if path is not None]  # all of them: a row without a path was refused


def write_once(target: Path, data: bytes) -> str:
    """`target` holding `data`: kept when it already does, else written to a temporary name and renamed."""
    if target.is_file() and target.stat().st_size == len(data):
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, target)  # atomic: readers see no file or the whole file
    finally:
        temporary.unlink(missing_ok=True)
    return str(target)


def decodable_file(path: str) -> bool:
    with open(path, "rb") as handle:
        return device_decodable(handle.read(1 << 16))  # the header is in the first bytes


def _image_bytes(value) -> bytes | None:
    data = value.get("bytes") if isinstance(value, dict) else value
    return bytes(data) if isinstance(data, (bytes, bytearray)) and data else None


def _undecoded(dataset, column: str):
    """The dataset with `column` as {'bytes', 'path'} dicts (an Image feature that decodes would give PIL images)."""
    import datasets

    feature = (getattr(dataset, "features", None) or {}).get(column)
    if isinstance(feature, datasets.Image) and feature.decode:
        return dataset.cast_column(column, datasets.Image(decode=False))
    return dataset
