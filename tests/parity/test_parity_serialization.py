"""Checkpoints cross between ember and PyTorch in both directions, views staying views.
Skipped when PyTorch is not installed."""

import io

import numpy as np
import pytest

import ember
from ember._dtype import ALL_DTYPES

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _np(t):
    if isinstance(t, torch.Tensor):
        t = t.detach()
        raw = {torch.bfloat16: torch.int16, torch.float8_e4m3fn: torch.uint8,
               torch.float8_e5m2: torch.uint8}.get(t.dtype)
        return t.contiguous().view(raw).numpy() if raw else t.numpy()
    return t.detach()._data


def _assert_same(e, t):
    a, b = _np(e), _np(t)
    assert tuple(a.shape) == tuple(b.shape)
    assert a.dtype.itemsize == b.dtype.itemsize
    np.testing.assert_array_equal(np.ascontiguousarray(a).reshape(-1).view(np.uint8),
                                  np.ascontiguousarray(b).reshape(-1).view(np.uint8))


def _ember_checkpoint(tmp_path):
    base = ember.arange(24.0).reshape(4, 6)
    obj = {"dtypes": {d.name: (ember.arange(-3, 9) % 5).reshape(3, 4).to(d)
                      for d in ALL_DTYPES},
           "views": {"base": base, "row": base[1], "t": base.t(), "cols": base[:, 1::2]},
           "model": ember.nn.Linear(3, 2).state_dict(), "step": 7, "name": "run"}
    path = tmp_path / "ember.pt"
    ember.save(obj, path)
    return obj, path


@pytest.mark.parametrize("mmap", [False, True])
def test_pytorch_loads_ember_files(tmp_path, mmap):
    obj, path = _ember_checkpoint(tmp_path)
    got = torch.load(path, weights_only=True, mmap=mmap)
    assert got["step"] == 7 and got["name"] == "run"
    for name, t in obj["dtypes"].items():
        assert str(got["dtypes"][name].dtype) == f"torch.{name}"
        _assert_same(t, got["dtypes"][name])
    for key in ("base", "row", "t", "cols"):
        _assert_same(obj["views"][key], got["views"][key])
        assert got["views"][key].stride() == obj["views"][key].stride()
    v = got["views"]
    assert v["row"].untyped_storage().data_ptr() == v["base"].untyped_storage().data_ptr()
    v["base"][1, 1] = -1.0
    assert v["row"][1] == -1.0 and v["t"][1, 1] == -1.0
    linear = torch.nn.Linear(3, 2)
    linear.load_state_dict(got["model"])
    _assert_same(obj["model"]["weight"], linear.weight)


def test_ember_loads_pytorch_files_and_pytorch_reloads_them(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3),
                                torch.nn.Flatten(), torch.nn.Linear(12, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    model(torch.randn(2, 2, 4, 4)).sum().backward()
    opt.step()
    base = torch.arange(12.0).reshape(3, 4)
    obj = {"model": model.state_dict(), "opt": opt.state_dict(),
           "views": [base, base[1], base.t()], "half": torch.ones(3, dtype=torch.float16),
           "bf16": torch.randn(4).to(torch.bfloat16)}
    torch.save(obj, tmp_path / "torch.pt")
    got = ember.load(tmp_path / "torch.pt")
    for key, t in obj["model"].items():
        _assert_same(got["model"][key], t)
    assert got["opt"]["param_groups"][0]["lr"] == 0.01
    _assert_same(got["opt"]["state"][0]["exp_avg"], obj["opt"]["state"][0]["exp_avg"])
    _assert_same(got["half"], obj["half"])
    _assert_same(got["bf16"], obj["bf16"])
    got["views"][0][1, 2] = 100.0
    assert got["views"][1][2].item() == 100.0 and got["views"][2][2, 1].item() == 100.0

    ember.save(got, tmp_path / "again.pt")
    back = torch.load(tmp_path / "again.pt", weights_only=True)
    model.load_state_dict(back["model"])
    opt.load_state_dict(back["opt"])
    assert back["views"][1].untyped_storage().data_ptr() == \
        back["views"][0].untyped_storage().data_ptr()
    assert back["views"][1][2] == 100.0


def test_the_same_error_for_a_rejected_global(tmp_path):
    buf = io.BytesIO()
    torch.save({"c": __import__("collections").deque([1])}, buf)
    buf.seek(0)
    with pytest.raises(Exception) as ours:
        ember.load(buf)
    assert "Unsupported global: GLOBAL collections.deque" in str(ours.value)


def test_tensor_and_parameter_attributes_cross_both_ways(tmp_path):
    t = torch.ones(2)
    t.foo = "bar"
    p = torch.nn.Parameter(torch.zeros(3))
    p.tag = 3
    torch.save({"t": t, "p": p}, tmp_path / "attrs.pt")
    got = ember.load(tmp_path / "attrs.pt")
    assert got["t"].foo == "bar" and got["p"].tag == 3
    assert type(got["p"]) is ember.nn.Parameter
    ember.save(got, tmp_path / "back.pt")
    back = torch.load(tmp_path / "back.pt", weights_only=True)
    assert back["t"].foo == "bar" and back["p"].tag == 3
    assert type(back["p"]) is torch.nn.Parameter


def test_views_keep_pytorch_storage_offsets_both_ways():
    def views(lib):
        base = lib.arange(24.0).reshape(4, 6)
        return {"base": base, "row": base[2], "cols": base[1:, 1::2]}

    for writer, reader in ((torch, ember), (ember, torch)):
        buf = io.BytesIO()
        writer.save(views(writer), buf)
        buf.seek(0)
        got = reader.load(buf)
        assert [got[k].storage_offset() for k in ("base", "row", "cols")] == [0, 12, 7]
        assert got["cols"].untyped_storage().data_ptr() == \
            got["base"].untyped_storage().data_ptr()
        assert got["cols"].untyped_storage().nbytes() == 96
