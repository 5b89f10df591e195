"""Checkpoints cross between ember and PyTorch in both directions, views staying views.
Skipped when PyTorch is not installed."""

import io
import warnings

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


_LEGACY_DTYPES = [d for d in ALL_DTYPES      # PyTorch cannot read its own legacy untyped storages
                  if d.name not in ("uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2")]


def test_legacy_format_files_cross_both_ways():
    def obj(lib):
        base = lib.arange(12.0)
        return {"base": base, "mid": base[3:7], "t": base.reshape(3, 4).t(),
                "p": lib.nn.Parameter(lib.ones(2)),
                "dtypes": {d.name: (lib.arange(-3, 9) % 5).to(getattr(lib, d.name))
                           for d in _LEGACY_DTYPES}}

    for writer, reader in ((ember, torch), (torch, ember)):
        buf = io.BytesIO()
        writer.save(obj(writer), buf, _use_new_zipfile_serialization=False)
        buf.seek(0)
        got = reader.load(buf, weights_only=True)
        want = obj(reader)
        for name in want["dtypes"]:
            assert got["dtypes"][name].tolist() == want["dtypes"][name].tolist()
        assert got["t"].stride() == (1, 4) and got["mid"].storage_offset() == 3
        assert got["mid"].untyped_storage().data_ptr() == \
            got["base"].untyped_storage().data_ptr()
        assert type(got["p"]).__name__ == "Parameter" and got["p"].requires_grad


def test_empty_tensors_saved_by_ember_keep_their_strides_in_pytorch():
    buf = io.BytesIO()
    ember.save([ember.zeros(0, 3), ember.zeros(3, 0, 2)], buf)
    buf.seek(0)
    got = torch.load(buf)
    assert [t.stride() for t in got] == [(3, 1), (2, 2, 1)]


def test_a_whole_pytorch_model_loads_as_ember_modules():
    model = torch.nn.Sequential(torch.nn.Conv1d(2, 3, 2), torch.nn.BatchNorm1d(3),
                                torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(9, 2))
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) + 0.1 * i)
    model.eval()
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    ours = ember.load(buf, weights_only=False)
    assert repr(ours) == repr(model)
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 2, 4)
    np.testing.assert_allclose(ours(ember.tensor(x)).detach().numpy(),
                               model(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def _torch_round_trip(obj, legacy):
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    buf.seek(0)
    return ember.load(buf)


@pytest.mark.parametrize("legacy", [False, True])
def test_torch_conjugate_and_negative_bits_load_as_their_values(legacy):
    z = torch.tensor([1 + 2j, -3 - 4j])
    got = _torch_round_trip({"conj": z.conj(), "plain": z}, legacy)
    assert got["conj"].tolist() == [1 - 2j, -3 + 4j]
    assert got["plain"].tolist() == [1 + 2j, -3 - 4j]
    assert _torch_round_trip(z.conj().imag, legacy).tolist() == [-2.0, 4.0]


@pytest.mark.parametrize("legacy", [False, True])
def test_storages_saved_by_themselves_cross_both_ways(legacy):
    for src, dst in ((ember, torch), (torch, ember)):
        x = src.arange(4.0)
        buf = io.BytesIO()
        src.save({"s": x.storage(), "t": x[1:]}, buf, _use_new_zipfile_serialization=not legacy)
        buf.seek(0)
        got = dst.load(buf)
        got["t"][0] = 50.0
        assert got["s"].dtype == dst.float32 and list(got["s"]) == [0.0, 50.0, 2.0, 3.0]


@pytest.mark.parametrize("protocol", [2, 3, 4, 5, -1])
@pytest.mark.parametrize("legacy", [False, True])
def test_pytorch_loads_ember_files_whose_text_looks_like_its_stand_in_names(legacy, protocol):
    obj = {"s": "cember\nfloat32\n", "d": ember.float32, "h": ember.float16,
           "w": {f"t{i}": ember.full((3,), float(i)) for i in range(50)}}
    buf = io.BytesIO()
    ember.save(obj, buf, _use_new_zipfile_serialization=not legacy, pickle_protocol=protocol)
    buf.seek(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # torch: "Detected pickle protocol 4 ..."
        got = torch.load(buf, weights_only=protocol in (2, 3))   # it reads 2-3 only so
    assert got["s"] == "cember\nfloat32\n"
    assert got["d"] is torch.float32 and got["h"] is torch.float16
    assert [t.tolist() for t in got["w"].values()] == [[float(i)] * 3 for i in range(50)]


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_a_string_like_the_only_stand_in_line_survives_every_protocol(protocol):
    """Protocol 4 on writes no GLOBAL lines: a user string equal to the one stand-in line
    must not be taken for it (it was rewritten, and the dtype left as ember's name)."""
    buf = io.BytesIO()
    ember.save({"d": ember.float32, "s": "cember\nfloat32\n"}, buf, pickle_protocol=protocol)
    buf.seek(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # torch: "Detected pickle protocol 4 ..."
        got = torch.load(buf, weights_only=protocol < 4)
    assert got == {"d": torch.float32, "s": "cember\nfloat32\n"}
