"""ember.save -> ember.load, and the file layout PyTorch expects."""

import copy
import io
import os
import pickle
import struct
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import ember
from ember._dtype import ALL_DTYPES
from ember._tensor import _make


def roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    ember.save(obj, buf)
    buf.seek(0)
    return ember.load(buf, **load_kwargs)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_every_dtype(dtype):
    t = (ember.arange(-3, 9) % 5).reshape(3, 4).to(dtype)
    out = roundtrip({"t": t, "nc": t.t(), "zero_d": t[1, 1], "empty": t[:0]})
    for key, want in [("t", t), ("nc", t.t()), ("zero_d", t[1, 1]), ("empty", t[:0])]:
        got = out[key]
        assert got.dtype is dtype and got.shape == want.shape
        assert got.stride() == want.stride()
        bits = np.dtype(f"u{dtype.itemsize}") if dtype.itemsize in (1, 2, 4, 8) else None
        if bits is not None:
            np.testing.assert_array_equal(got._data.view(bits), want._data.view(bits))
        else:
            np.testing.assert_array_equal(got._data, want._data)


def test_views_share_one_storage_and_stay_views():
    base = ember.arange(24.0).reshape(4, 6)
    obj = {"base": base, "row": base[1], "t": base.t(), "cols": base[:, 1::2],
           "expanded": ember.arange(3.0).expand(5, 3)}
    buf = io.BytesIO()
    ember.save(obj, buf)
    storages = [n for n in zipfile.ZipFile(buf).namelist() if "/data/" in n]
    assert len(storages) == 2
    out = roundtrip(obj)
    out["base"][1, 1] = -1.0
    assert out["row"][1].item() == -1.0 and out["t"][1, 1].item() == -1.0
    assert out["cols"][1, 0].item() == -1.0
    assert out["expanded"].stride() == (0, 1)
    assert out["row"].storage_offset() == 6 and out["cols"].storage_offset() == 1
    ptr = out["base"].untyped_storage().data_ptr()
    assert out["cols"].untyped_storage().data_ptr() == ptr
    assert out["cols"].untyped_storage().nbytes() == 96


def test_a_view_saved_alone_writes_its_whole_storage_as_pytorch_does():
    buf = io.BytesIO()
    ember.save(ember.arange(10.0)[6:8], buf)
    assert zipfile.ZipFile(buf).getinfo("archive/data/0").file_size == 40
    buf.seek(0)
    np.testing.assert_array_equal(ember.load(buf).numpy(), [6.0, 7.0])


def test_state_dict_with_metadata_and_parameters():
    model = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4))
    sd = roundtrip(model.state_dict())
    assert isinstance(sd, OrderedDict) and list(sd) == list(model.state_dict())
    assert sd._metadata == model.state_dict()._metadata
    fresh = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4))
    fresh.load_state_dict(sd)
    np.testing.assert_array_equal(fresh[0].weight.detach().numpy(),
                                  model[0].weight.detach().numpy())
    p = roundtrip(model[0].weight)
    assert type(p) is ember.nn.Parameter and p.requires_grad


def test_optimizer_and_scheduler_state_dicts():
    w = ember.nn.Parameter(ember.ones(3))
    opt = ember.optim.Adam([w], lr=0.1)
    sched = ember.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
    for _ in range(2):
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
        sched.step()
    state = roundtrip({"opt": opt.state_dict(), "sched": sched.state_dict()})
    w2 = ember.nn.Parameter(ember.ones(3))
    opt2 = ember.optim.Adam([w2], lr=1.0)
    opt2.load_state_dict(state["opt"])
    np.testing.assert_array_equal(opt2.state[w2]["exp_avg"].numpy(),
                                  opt.state[w]["exp_avg"].numpy())
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    assert state["sched"] == sched.state_dict()


def test_plain_python_values():
    obj = {"n": None, "b": True, "i": -(2 ** 70), "f": float("inf"), "c": 1 + 2j, "s": "é",
           "bytes": b"\x00\x01", "t": (1, [2, {3: "x"}]), "set": {1, 2},
           "dtype": ember.float16, "dev": ember.device("cpu"), "size": ember.Size([1, 2])}
    out = roundtrip(obj)
    assert out == obj and type(out["size"]) is ember.Size


def test_frozenset_needs_weights_only_false():
    """PyTorch's weights-only loader refuses a frozenset (a set it takes)."""
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL frozenset was not an allowed"):
        roundtrip({"fs": frozenset({3})})
    assert roundtrip({"fs": frozenset({3})}, weights_only=False) == {"fs": frozenset({3})}


def test_requires_grad_and_attributes_survive():
    t = ember.ones(2, requires_grad=True)
    assert roundtrip(t).requires_grad
    u = ember.ones(2)
    u.note = "hello"
    assert roundtrip(u).note == "hello"


def test_records_are_64_byte_aligned_and_laid_out_as_pytorch_does():
    buf = io.BytesIO()
    ember.save({"a": ember.ones(3), "b": ember.zeros(5, dtype=ember.int8)}, buf)
    raw = buf.getvalue()
    zf = zipfile.ZipFile(io.BytesIO(raw))
    names = zf.namelist()
    assert names[0] == "archive/data.pkl"
    assert {"archive/byteorder", "archive/version", "archive/data/0",
            "archive/data/1"} <= set(names)
    assert zf.read("archive/byteorder") == b"little" and zf.read("archive/version") == b"3\n"
    for info in zf.infolist():
        assert info.compress_type == zipfile.ZIP_STORED
        name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26:
                                                       info.header_offset + 30])
        assert (info.header_offset + 30 + name_len + extra_len) % 64 == 0


def test_mmap_maps_the_file_and_writes_stay_private(tmp_path):
    path = tmp_path / "m.pt"
    ember.save({"w": ember.arange(1000.0)}, path)
    before = path.read_bytes()
    out = ember.load(path, mmap=True)
    root = out["w"]._data
    while getattr(root, "base", None) is not None and not isinstance(root, np.memmap):
        root = root.base
    assert isinstance(root, np.memmap)
    out["w"][0] = 5.0
    assert out["w"][0].item() == 5.0 and path.read_bytes() == before
    ember.save(out, tmp_path / "again.pt")         # a mapped tensor saves only its storage
    assert (tmp_path / "again.pt").stat().st_size < len(before) + 1024
    np.testing.assert_array_equal(ember.load(tmp_path / "again.pt")["w"].numpy()[1:],
                                  np.arange(1.0, 1000.0))


def test_mmap_needs_a_path():
    buf = io.BytesIO()
    ember.save(ember.ones(2), buf)
    buf.seek(0)     # (at its end, the file is no zip: PyTorch then names the zip format)
    with pytest.raises(ValueError, match="f must be a file path in order to use the mmap"):
        ember.load(buf, mmap=True)


def test_whole_module_with_weights_only_false(tmp_path):
    model = ember.nn.Sequential(ember.nn.Linear(2, 3), ember.nn.ReLU())
    ember.save(model, tmp_path / "model.pt")
    with pytest.raises(pickle.UnpicklingError, match="add_safe_globals"):
        ember.load(tmp_path / "model.pt")
    loaded = ember.load(tmp_path / "model.pt", weights_only=False)
    x = ember.randn(4, 2)
    np.testing.assert_array_equal(loaded(x).detach().numpy(), model(x).detach().numpy())
    assert isinstance(loaded[0].weight, ember.nn.Parameter)


def test_module_pickle_and_deepcopy():
    model = ember.nn.Sequential(ember.nn.Linear(2, 3), ember.nn.BatchNorm1d(3))
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert clone[0].weight is not model[0].weight
        np.testing.assert_array_equal(clone[0].weight.detach().numpy(),
                                      model[0].weight.detach().numpy())
        assert isinstance(clone[0].weight, ember.nn.Parameter)
        assert list(clone.state_dict()) == list(model.state_dict())


def test_saving_two_dtypes_over_one_buffer_raises():
    a = ember.zeros(4)
    as_int = _make(a._data.view(np.int32))           # ember has no Tensor.view(dtype) yet
    with pytest.raises(RuntimeError, match="view the same data as different types"):
        ember.save([a, as_int], io.BytesIO())


def _legacy_roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    ember.save(obj, buf, _use_new_zipfile_serialization=False)
    assert buf.getvalue()[:2] == b"\x80\x02"           # a pickle, not a zip archive
    buf.seek(0)
    return ember.load(buf, **load_kwargs)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_the_legacy_format_round_trips_every_dtype(dtype):
    # dtypes without a legacy storage class (uint16, float8) go as untyped storages
    t = (ember.arange(-3, 9) % 5).reshape(3, 4).to(dtype)
    out = _legacy_roundtrip({"t": t, "nc": t.t(), "zero_d": t[1, 1]})
    for key, want in [("t", t), ("nc", t.t()), ("zero_d", t[1, 1])]:
        assert out[key].dtype is dtype and out[key].shape == want.shape
        assert out[key].stride() == want.stride()
        assert out[key].tolist() == want.tolist()


def test_the_legacy_format_keeps_views_parameters_and_plain_objects():
    base = ember.arange(12.0)
    p = ember.nn.Parameter(ember.ones(2))
    out = _legacy_roundtrip({"base": base, "mid": base[3:7], "p": p, "n": [1, "x", 2.5],
                             "od": OrderedDict(a=1)}, weights_only=True)
    assert out["mid"].storage_offset() == 3 and out["mid"].tolist() == [3.0, 4.0, 5.0, 6.0]
    out["base"][4] = -1.0
    assert out["mid"][1].item() == -1.0                 # still a view of the saved storage
    assert type(out["p"]) is ember.nn.Parameter and out["p"].requires_grad
    assert out["n"] == [1, "x", 2.5] and out["od"] == OrderedDict(a=1)


def test_the_legacy_format_is_written_atomically_to_a_path(tmp_path):
    path = tmp_path / "old.pt"
    path.write_bytes(b"previous")
    with pytest.raises(ValueError, match="cannot pickle"):
        ember.save({"t": ember.ones(2), "bad": _Unpicklable()}, path,
                   _use_new_zipfile_serialization=False)
    assert path.read_bytes() == b"previous" and os.listdir(tmp_path) == ["old.pt"]
    ember.save(ember.ones(2), path, _use_new_zipfile_serialization=False)
    assert ember.load(path).tolist() == [1.0, 1.0]


def _saved_rebuild_args(obj):
    """The (offset, size, stride) ember.save writes for each tensor, read from data.pkl."""
    buf = io.BytesIO()
    ember.save(obj, buf)
    raw = zipfile.ZipFile(buf).read("archive/data.pkl")
    found = []

    class Reader(pickle.Unpickler):
        def find_class(self, module, name):
            if name == "_rebuild_tensor_v2":
                return lambda storage, offset, size, stride, *rest: found.append(
                    (offset, size, stride))
            return OrderedDict if name == "OrderedDict" else object

        def persistent_load(self, pid):
            return pid

    Reader(io.BytesIO(raw)).load()
    return found


def test_empty_tensors_are_saved_with_their_pytorch_strides():
    # NumPy gives empty arrays zero strides; PyTorch (which reads these files) does not
    got = _saved_rebuild_args([ember.zeros(0, 3), ember.zeros(3, 0, 2), ember.empty(0)])
    assert got == [(0, (0, 3), (3, 1)), (0, (3, 0, 2), (2, 2, 1)), (0, (0,), (1,))]


class _Unpicklable:
    def __reduce__(self):
        raise ValueError("cannot pickle this")


class Thing:
    """A class weights_only loading refuses."""


def test_an_explicit_pickle_module_makes_weights_only_default_to_false():
    buf = io.BytesIO()
    ember.save({"thing": Thing, "t": ember.ones(2)}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="Unsupported global"):
        ember.load(buf)
    buf.seek(0)
    assert ember.load(buf, pickle_module=pickle)["thing"] is Thing


@pytest.mark.parametrize("legacy", [False, True])
def test_a_storage_saved_by_itself_loads_as_a_typed_storage_sharing_memory(legacy):
    x = ember.arange(4.0)
    buf = io.BytesIO()
    ember.save({"s": x.storage(), "t": x[1:]}, buf, _use_new_zipfile_serialization=not legacy)
    buf.seek(0)
    got = ember.load(buf)           # weights_only, as PyTorch loads storages
    assert type(got["s"]) is ember.TypedStorage and got["s"].dtype == ember.float32
    got["t"][0] = 50.0
    assert list(got["s"]) == [0.0, 50.0, 2.0, 3.0]


def test_an_untyped_storage_loads_as_uint8_elements():
    buf = io.BytesIO()
    ember.save([ember.tensor([1, 2], dtype=ember.int16).untyped_storage()], buf)
    buf.seek(0)
    (got,) = ember.load(buf)
    assert got.dtype == ember.uint8 and list(got) == [1, 0, 2, 0]


def test_a_storage_and_a_tensor_of_another_type_over_one_memory_are_refused():
    x = ember.arange(3.0)
    with pytest.raises(RuntimeError, match="view the same data as different types"):
        ember.save({"s": x.untyped_storage(), "t": x}, io.BytesIO())


def test_a_self_referencing_container_loads_with_weights_only_false():
    loop = [ember.ones(1)]
    loop.append(loop)
    buf = io.BytesIO()
    ember.save(loop, buf)
    buf.seek(0)
    got = ember.load(buf, weights_only=False)
    assert got[1] is got and got[0].tolist() == [1.0]
