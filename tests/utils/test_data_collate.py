"""default_collate and default_convert on every kind of sample."""

from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import ember
from ember.utils.data import default_collate, default_convert

Point = namedtuple("Point", "x y")


def test_tensors_are_stacked():
    out = default_collate([ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0])])
    assert out.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        default_collate([ember.ones(2), ember.ones(3)])


def test_numbers_strings_and_numpy():
    f = default_collate([1.5, 2.5])
    assert f.dtype == ember.float64 and f.tolist() == [1.5, 2.5]
    i = default_collate([1, 2])
    assert i.dtype == ember.int64
    assert default_collate(["a", "b"]) == ["a", "b"]
    arr = default_collate([np.ones(2, np.float32), np.zeros(2, np.float32)])
    assert arr.dtype == ember.float32 and arr.shape == (2, 2)
    scalars = default_collate([np.float32(1), np.float32(2)])
    assert scalars.dtype == ember.float32 and scalars.tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match="found <U1"):
        default_collate([np.array(["a"]), np.array(["b"])])


def test_bools_collate_into_a_bool_tensor():
    out = default_collate([True, False])
    assert out.dtype == ember.bool and out.tolist() == [True, False]
    assert default_collate([(1, True), (2, True)])[1].dtype == ember.bool


def test_strings_inside_samples_come_back_as_tuples():
    assert default_collate([(1, "a"), (2, "b")])[1] == ("a", "b")
    assert default_collate([["x", "a"], ["y", "b"]]) == [("x", "y"), ("a", "b")]
    assert default_collate([{"k": "a"}, {"k": "b"}]) == {"k": ["a", "b"]}


def test_nested_containers():
    batch = [{"img": ember.ones(2), "meta": (1, "a"), "p": Point(1.0, 2)},
             {"img": ember.zeros(2), "meta": (2, "b"), "p": Point(3.0, 4)}]
    out = default_collate(batch)
    assert out["img"].shape == (2, 2)
    assert isinstance(out["meta"], list) and out["meta"][0].tolist() == [1, 2]
    assert out["meta"][1] == ("a", "b")         # PyTorch transposes into tuples
    assert isinstance(out["p"], Point) and out["p"].x.tolist() == [1.0, 3.0]
    od = default_collate([OrderedDict(a=1), OrderedDict(a=2)])
    assert isinstance(od, OrderedDict) and od["a"].tolist() == [1, 2]
    lists = default_collate([[1, 2], [3, 4]])
    assert [t.tolist() for t in lists] == [[1, 3], [2, 4]]
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="batch must contain tensors, numpy arrays, numbers"):
        default_collate([object(), object()])


def test_default_convert():
    out = default_convert({"a": np.arange(3), "b": (np.float64(2.0), "s"), "c": [np.ones(1)]})
    assert isinstance(out["a"], ember.Tensor) and out["a"].dtype == ember.int64
    assert isinstance(out["b"], list) and out["b"][1] == "s"
    assert isinstance(out["c"][0], ember.Tensor)
    assert default_convert(Point(np.ones(1), 2)).y == 2


def test_pytorchs_documented_collate_module_path_takes_custom_maps():
    from ember.utils.data._utils.collate import collate, collate_tensor_fn, default_collate_fn_map

    class Point:
        def __init__(self, x):
            self.x = x

    def collate_point(batch, *, collate_fn_map=None):
        return [p.x for p in batch]
    table = {**default_collate_fn_map, Point: collate_point}
    out = collate([{"p": Point(3), "t": ember.ones(2)}, {"p": Point(4), "t": ember.zeros(2)}],
                  collate_fn_map=table)
    assert out["p"] == [3, 4] and out["t"].tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert collate_tensor_fn([ember.ones(1), ember.zeros(1)]).tolist() == [[1.0], [0.0]]


class _TaggedDict(dict):
    """A dict subclass carrying extra state, as user batches sometimes are."""


def test_dict_subclass_type_and_attributes_survive():
    first = _TaggedDict(a=1)
    first.tag = "keep"
    out = default_collate([first, _TaggedDict(a=2)])
    assert type(out) is _TaggedDict and out.tag == "keep" and out["a"].tolist() == [1, 2]
    conv = default_convert(_TaggedDict(a=np.zeros(2)))
    assert type(conv) is _TaggedDict and conv["a"].tolist() == [0.0, 0.0]
