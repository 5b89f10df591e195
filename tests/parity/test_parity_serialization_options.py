"""Checkpoints written under torch.serialization's options (no CRC-32s, skip_data, zip64,
no byteorder record) read the same in ember and PyTorch, both ways; the public names agree."""

import io

import numpy as np
import pytest

import ember
import ember.serialization as S
from ember.serialization import _zip

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity
TS = torch.serialization


def _torch_saved(obj, **options):
    buf = io.BytesIO()
    torch.save(obj, buf, **options)
    return buf.getvalue()


def _ember_saved(obj, **options):
    buf = io.BytesIO()
    ember.save(obj, buf, **options)
    return buf.getvalue()


def _values():
    return np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)


def test_torch_files_without_crcs_load_in_ember():
    TS.set_crc32_options(False)
    try:
        data = _torch_saved({"x": torch.from_numpy(_values())})
    finally:
        TS.set_crc32_options(True)
    np.testing.assert_array_equal(ember.load(io.BytesIO(data))["x"].numpy(), _values())


def test_ember_files_without_crcs_load_in_torch():
    S.set_crc32_options(False)
    try:
        data = _ember_saved({"x": ember.from_numpy(_values())})
    finally:
        S.set_crc32_options(True)
    np.testing.assert_array_equal(torch.load(io.BytesIO(data))["x"].numpy(), _values())


@pytest.mark.parametrize("writer", ["torch", "ember"])
def test_skip_data_files_hold_zeros_of_the_right_layout_in_both(writer):
    if writer == "torch":
        with TS.skip_data():
            data = _torch_saved({"x": torch.from_numpy(_values()), "i": torch.ones(3).long()})
    else:
        with S.skip_data():
            data = _ember_saved({"x": ember.from_numpy(_values()), "i": ember.ones(3).long()})
    for lib in (ember, torch):
        out = lib.load(io.BytesIO(data))
        assert out["x"].numpy().tolist() == [[0.0] * 3] * 2
        assert str(out["i"].dtype).split(".")[-1] == "int64"


def test_zip64_ember_files_load_in_torch(monkeypatch):
    monkeypatch.setattr(_zip, "_ZIP64_LIMIT", 100)
    monkeypatch.setattr(_zip, "_ENTRIES_LIMIT", 3)
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    data = _ember_saved({"x": ember.from_numpy(x), "y": ember.arange(3)})
    out = torch.load(io.BytesIO(data))
    np.testing.assert_array_equal(out["x"].numpy(), x)
    assert out["y"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("choice", ["NATIVE", "LITTLE", "BIG", None])
@pytest.mark.parametrize("writer", ["torch", "ember"])
def test_files_without_byteorder_load_alike_under_each_default(writer, choice):
    if writer == "torch":
        data = _torch_saved({"x": torch.from_numpy(_values())}, _disable_byteorder_record=True)
    else:
        data = _ember_saved({"x": ember.from_numpy(_values())}, _disable_byteorder_record=True)
    TS.set_default_load_endianness(choice and getattr(TS.LoadEndianness, choice))
    S.set_default_load_endianness(choice and getattr(S.LoadEndianness, choice))
    try:
        theirs = torch.load(io.BytesIO(data), weights_only=True)["x"].numpy()
        ours = ember.load(io.BytesIO(data))["x"].numpy()
    finally:
        TS.set_default_load_endianness(None)
        S.set_default_load_endianness(None)
    np.testing.assert_array_equal(ours.view(np.uint32), theirs.view(np.uint32))


def test_public_names_and_constants_agree():
    for name in TS.__all__:
        assert hasattr(S, name), name
    for name in ("LONG_SIZE", "INT_SIZE", "SHORT_SIZE", "MAGIC_NUMBER", "PROTOCOL_VERSION",
                 "STORAGE_KEY_SEPARATOR", "IS_WINDOWS", "DEFAULT_PROTOCOL"):
        assert getattr(S, name) == getattr(TS, name), name
    assert [e.name for e in S.LoadEndianness] == [e.name for e in TS.LoadEndianness]
    assert [e.value for e in S.LoadEndianness] == [e.value for e in TS.LoadEndianness]
