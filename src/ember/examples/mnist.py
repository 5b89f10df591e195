"""MNIST from the standard IDX files: a reader for the IDX format and the four-file layout.

The IDX format (LeCun's): two zero bytes, a type code, the number of dimensions, each dimension
as a big-endian uint32, then the values in row-major order, big-endian. Files may be gzipped.
"""

import gzip
from pathlib import Path

import numpy as np

__all__ = ["read_idx", "load_mnist"]

# IDX type code -> big-endian NumPy dtype
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path):
    """The array stored in an IDX file (``.gz`` allowed), in native byte order."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise ValueError(f"{path} is not an IDX file (bad magic number {data[:4].hex()})")
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{path}: IDX header truncated")
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_DTYPES[data[2]])
    count = int(np.prod(shape, dtype=np.int64))
    if len(data) != header + count * dtype.itemsize:
        raise ValueError(f"{path}: IDX header says shape {shape} of {dtype.name} "
                         f"({count * dtype.itemsize} bytes) but the file holds "
                         f"{len(data) - header} bytes of data")
    array = np.frombuffer(data, dtype, count=count, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))


def _find(root, split, kind):
    # the official names, and the common variant with a dot before idx
    rank = 3 if kind == "images" else 1
    names = [f"{split}-{kind}-idx{rank}-ubyte", f"{split}-{kind}.idx{rank}-ubyte"]
    for name in names:
        for candidate in (root / name, root / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    raise FileNotFoundError(f"no {names[0]} (or {names[0]}.gz) in {root}")


def load_mnist(root):
    """``((train_images, train_labels), (test_images, test_labels))`` from the four MNIST IDX
    files in ``root``: images as uint8 arrays (N, H, W), labels as int64 arrays (N,)."""
    root = Path(root)
    splits = []
    for split in ("train", "t10k"):
        images = read_idx(_find(root, split, "images"))
        labels = read_idx(_find(root, split, "labels")).astype(np.int64)
        if images.ndim != 3 or labels.shape != images.shape[:1]:
            raise ValueError(f"{root}: {split} images {images.shape} and labels {labels.shape} "
                             "do not pair up (expected (N, H, W) and (N,))")
        splits.append((images, labels))
    return tuple(splits)
