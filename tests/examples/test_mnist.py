"""The IDX reader and the MNIST layout, on tiny files written here byte by byte."""

import gzip
import struct

import numpy as np
import pytest

from ember.examples.mnist import load_mnist, read_idx


def idx_bytes(array, code):
    """An IDX file's bytes, written independently of the reader."""
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def write_mnist(root, n_train, n_test, size=28, gz=False, seed=0):
    """Four IDX files of learnable fake digits: class k lights up rows 2k..2k+1."""
    root.mkdir(parents=True, exist_ok=True)
    gen = np.random.default_rng(seed)
    for split, n in (("train", n_train), ("t10k", n_test)):
        labels = gen.integers(0, 10, n).astype(np.uint8)
        images = gen.integers(0, 60, (n, size, size)).astype(np.uint8)
        for i, k in enumerate(labels):
            images[i, 2 * k:2 * k + 2, 4:-4] = 255
        for kind, array, code, rank in (("images", images, 0x08, 3), ("labels", labels, 0x08, 1)):
            path = root / f"{split}-{kind}-idx{rank}-ubyte"
            data = idx_bytes(array, code)
            if gz:
                path = path.with_name(path.name + ".gz")
                data = gzip.compress(data)
            path.write_bytes(data)
    return root


@pytest.mark.parametrize("dtype, code", [(np.uint8, 0x08), (np.int8, 0x09), (np.int16, 0x0B),
                                         (np.int32, 0x0C), (np.float32, 0x0D),
                                         (np.float64, 0x0E)])
def test_read_idx_decodes_each_type_big_endian(tmp_path, dtype, code):
    array = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype)
    path = tmp_path / "a.idx"
    path.write_bytes(idx_bytes(array, code))
    out = read_idx(path)
    assert out.dtype == np.dtype(dtype) and out.dtype.isnative
    np.testing.assert_array_equal(out, array)
    out[0, 0, 0] = 1                                  # a writable copy, not a view of the bytes


def test_read_idx_reads_gzip_and_1d(tmp_path):
    labels = np.array([7, 0, 3], np.uint8)
    path = tmp_path / "labels.gz"
    path.write_bytes(gzip.compress(idx_bytes(labels, 0x08)))
    np.testing.assert_array_equal(read_idx(path), labels)


@pytest.mark.parametrize("data, match", [
    (b"\x00\x01\x08\x01\x00\x00\x00\x01\x05", "not an IDX file"),
    (b"\x00\x00\x07\x01\x00\x00\x00\x01\x05", "not an IDX file"),
    (b"\x00\x00", "not an IDX file"),
    (b"\x00\x00\x08\x02\x00\x00\x00\x02", "header truncated"),
    (b"\x00\x00\x08\x01\x00\x00\x00\x03\x05\x06", r"shape \(3,\) of uint8 \(3 bytes\).*holds 2"),
])
def test_read_idx_rejects_bad_files(tmp_path, data, match):
    path = tmp_path / "bad"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=match):
        read_idx(path)


@pytest.mark.parametrize("gz", [False, True])
def test_load_mnist_pairs_images_and_labels(tmp_path, gz):
    (xtr, ytr), (xte, yte) = load_mnist(write_mnist(tmp_path, 12, 5, gz=gz))
    assert xtr.shape == (12, 28, 28) and xtr.dtype == np.uint8
    assert ytr.shape == (12,) and ytr.dtype == np.int64
    assert xte.shape == (5, 28, 28) and yte.shape == (5,)
    for image, label in zip(xtr, ytr):                # the lit rows encode the label
        assert (image[2 * label, 4:-4] == 255).all()


def test_load_mnist_names_the_missing_file(tmp_path):
    write_mnist(tmp_path, 4, 2)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(FileNotFoundError, match="t10k-labels-idx1-ubyte"):
        load_mnist(tmp_path)


def test_load_mnist_rejects_mismatched_counts(tmp_path):
    write_mnist(tmp_path, 4, 2)
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(idx_bytes(np.zeros(3, np.uint8), 0x08))
    with pytest.raises(ValueError, match="do not pair up"):
        load_mnist(tmp_path)
