"""ember.utils.safetensors: named tensors to and from safetensors files."""

import numpy as np
import pytest
import safetensors.numpy

import ember
from ember._dtype import ALL_DTYPES
from ember.utils.safetensors import load, load_file, save, save_file

SUPPORTED = [d for d in ALL_DTYPES if d is not ember.complex128]   # no C128 in the format


@pytest.mark.parametrize("dtype", SUPPORTED, ids=str)
def test_roundtrip_every_dtype(dtype, tmp_path):
    t = (ember.arange(-3, 9) % 5).reshape(3, 4).to(dtype)
    save_file({"t": t, "nc": t.t()}, tmp_path / "x.safetensors")
    out = load_file(tmp_path / "x.safetensors")
    bits = np.dtype(f"u{dtype.itemsize}")
    for key, want in [("t", t), ("nc", t.t())]:
        assert out[key].dtype is dtype and out[key].shape == want.shape
        np.testing.assert_array_equal(out[key]._data.view(bits),
                                      np.ascontiguousarray(want._data).view(bits))
    out["t"][0, 0] = 1                              # loaded tensors are writable
    assert out["t"][0, 0].item() == 1


def test_bytes_api_and_metadata_match_the_safetensors_package():
    data = save({"w": ember.arange(4.0)}, metadata={"format": "pt"})
    np.testing.assert_array_equal(safetensors.numpy.load(data)["w"], np.arange(4.0,
                                                                                dtype=np.float32))
    ours = load(safetensors.numpy.save({"a": np.arange(3, dtype=np.int16)}))
    assert ours["a"].dtype is ember.int16 and ours["a"].tolist() == [0, 1, 2]


def test_module_state_dict_through_safetensors(tmp_path):
    model = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4))
    save_file(model.state_dict(), tmp_path / "m.safetensors")
    fresh = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4))
    fresh.load_state_dict(load_file(tmp_path / "m.safetensors"))
    for a, b in zip(fresh.state_dict().values(), model.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_bad_input():
    with pytest.raises(ValueError, match="expected ember.Tensor"):     # as safetensors.torch
        save({"x": np.zeros(2)})
    with pytest.raises(ValueError, match="Expected a dict of"):
        save([ember.ones(1)])
    with pytest.raises(TypeError, match="cannot store tensor `c` of dtype ember.complex128"):
        save({"c": ember.zeros(2, dtype=ember.complex128)})
    with pytest.raises(RuntimeError, match="invalid safetensors data"):
        load(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    with pytest.raises(RuntimeError, match="invalid safetensors data"):
        load(save({"w": ember.ones(4)})[:-3])
