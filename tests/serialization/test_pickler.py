"""ember.save's C pickler writes stand-ins for PyTorch's globals and renames them: its pickle
must be byte for byte the pure-Python pickler's, PyTorch's names and all."""

import io
import pickle
from collections import OrderedDict

import pytest

import ember
from ember.serialization._pickler import PyPickler, StorageTable, dumps


def _pure_python(obj, pid_suffix=()):
    buf, table = io.BytesIO(), StorageTable()
    PyPickler(buf, table, 2, pid_suffix).dump(obj)
    return buf.getvalue(), [s.nbytes for s in table.storages]


def _objects():
    base = ember.arange(12.0).reshape(3, 4)
    model = ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.BatchNorm1d(2))
    yield {"base": base, "row": base[1], "t": base.t(), "n": 3, "s": "x", "b": b"y"}
    yield model.state_dict()
    yield list(model.parameters())
    yield [ember.zeros(2, dtype=d) for d in (ember.float16, ember.bfloat16, ember.uint16,
                                             ember.float8_e5m2, ember.bool, ember.int64)]
    yield {"dtypes": [ember.float32, ember.int8, ember.float32], "dev": ember.device("cpu"),
           "size": ember.Size([2]), "layout": ember.strided, "meta": ember.empty(2, device="meta")}
    yield {f"t{i}": ember.full((4,), float(i)) for i in range(300)}


@pytest.mark.parametrize("legacy", [False, True])
def test_the_c_pickler_writes_the_pure_python_picklers_bytes(legacy):
    suffix = (None,) if legacy else ()
    for obj in _objects():
        data, table = dumps(obj, 2, suffix)
        assert (data, [s.nbytes for s in table.storages]) == _pure_python(obj, suffix)
        assert b"cember" not in data and b"ctorch" in data


def test_user_text_that_looks_like_a_stand_in_is_kept_as_is():
    tricky = {"s": "cember\nfloat32\n", "b": b"cember.serialization._names\n_torch_global_0\n",
              "d": ember.float32, "x": ember.tensor([1.5, 2.5])}
    data, _ = dumps(tricky)
    assert data == _pure_python(tricky)[0]
    assert data.count(b"ctorch\nfloat32\n") == 1 and data.count(b"cember\nfloat32\n") == 1
    buf = io.BytesIO()
    ember.save(tricky, buf)
    buf.seek(0)
    got = ember.load(buf)
    assert got["s"] == tricky["s"] and got["b"] == tricky["b"]
    assert got["d"] is ember.float32 and got["x"].tolist() == [1.5, 2.5]


def test_an_ordered_state_dict_of_many_small_tensors_round_trips():
    sd = OrderedDict((f"layer{i}.weight", ember.full((2, 3), float(i))) for i in range(200))
    buf = io.BytesIO()
    ember.save(sd, buf)
    buf.seek(0)
    got = ember.load(buf)
    assert type(got) is OrderedDict and list(got) == list(sd)
    assert [t[1, 2].item() for t in got.values()] == [float(i) for i in range(200)]


_LAMBDA = lambda x: x     # noqa: E731 (a module-level lambda: found by no attribute lookup)


def test_unpicklable_objects_raise_the_c_picklers_errors():
    def local():
        class Local:
            pass
        return Local()
    with pytest.raises(AttributeError, match="Can't pickle local object 'test_unpicklable"):
        ember.save(local(), io.BytesIO())
    with pytest.raises(pickle.PicklingError, match="attribute lookup <lambda> on"):
        ember.save({"f": _LAMBDA, "t": ember.ones(1)}, io.BytesIO())
