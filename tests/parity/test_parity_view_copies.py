"""The ``*_copy`` functions against torch's: values, shapes, strides, dtypes, gradients,
``out=`` and the errors with their messages."""

import numpy as np
import pytest

import ember
from ember.ops.view_copies import PUBLIC

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

X = np.arange(24.0).reshape(2, 3, 4) / 7
Z = (np.arange(6.0) - 2j * np.arange(6.0)).reshape(2, 3)

# (name, input, args, kwargs)
CASES = [
    ("alias_copy", X, (), {}), ("detach_copy", X, (), {}),
    ("diagonal_copy", X, (), {}), ("diagonal_copy", X, (-1, 2, 0), {}),
    ("diagonal_copy", X, (), {"offset": 1, "dim1": 1, "dim2": 2}),
    ("expand_copy", X, ((3, 2, 3, 4),), {}), ("expand_copy", X[:, :1], ((-1, 5, 4),), {}),
    ("expand_copy", X, ((2, 3, 4),), {"implicit": True}),
    ("permute_copy", X, ((2, 0, 1),), {}), ("permute_copy", X, (), {"dims": [1, 2, 0]}),
    ("select_copy", X, (2, -1), {}), ("select_copy", X, (), {"dim": 0, "index": 1}),
    ("slice_copy", X, (), {}), ("slice_copy", X, (2, 1, None, 2), {}),
    ("slice_copy", X, (1, -100, 100), {}), ("slice_copy", X, (-1, 3, 1), {}),
    ("slice_copy", X, (), {"dim": 1, "start": -2, "end": None, "step": 3}),
    ("split_copy", X, (2, 2), {}), ("split_copy", X, (), {"split_size": 1, "dim": 1}),
    ("split_with_sizes_copy", X, ([1, 0, 3], -1), {}),
    ("split_with_sizes_copy", X, (), {"split_sizes": (2, 1), "dim": 1}),
    ("squeeze_copy", X[:1, :, :1], (), {}), ("squeeze_copy", X[:1, :, :1], (2,), {}),
    ("squeeze_copy", X[:1, :, :1], ((0, 1, 2),), {}), ("squeeze_copy", X, (), {"dim": 0}),
    ("t_copy", X[0], (), {}), ("t_copy", X[0, 0], (), {}), ("t_copy", np.array(2.5), (), {}),
    ("transpose_copy", X, (0, -1), {}), ("transpose_copy", X, (), {"dim0": 1, "dim1": 1}),
    ("unbind_copy", X, (), {}), ("unbind_copy", X, (-1,), {}),
    ("unfold_copy", X, (2, 2, 1), {}), ("unfold_copy", X, (1, 3, 2), {}),
    ("unfold_copy", np.array(1.5), (0, 1, 1), {}),
    ("unfold_copy", X, (), {"dimension": 2, "size": 0, "step": 3}),
    ("unsqueeze_copy", X, (3,), {}), ("unsqueeze_copy", X, (), {"dim": -4}),
    ("view_as_complex_copy", X.reshape(3, 4, 2), (), {}),
    ("view_as_real_copy", Z[:, :2], (), {}),
    ("view_as_real_copy", Z, (), {}),
    ("view_copy", X, ((4, -1),), {}), ("view_copy", X, (), {"size": (24,)}),
    ("view_copy", X, ("int32",), {}), ("view_copy", X, (), {"dtype": "float16"}),
    ("view_copy", X, ("float64",), {}), ("view_copy", X, ("bool",), {}),
    ("view_copy", X, ("complex64",), {}),
]


def _pair(array, dtype="float32"):
    """(torch tensor, ember tensor) of the same values."""
    if np.iscomplexobj(array):
        dtype = "complex64"
    a = np.array(array, dtype=dtype)
    return torch.from_numpy(a.copy()), ember.tensor(a)


def _args(args, kwargs, lib):
    def convert(v):
        return getattr(lib, v) if isinstance(v, str) else v
    return [convert(a) for a in args], {k: convert(v) for k, v in kwargs.items()}


def _compare(got, want):
    if isinstance(want, (tuple, list)):
        assert type(got) is tuple and len(got) == len(want)
        for g, w in zip(got, want):
            _compare(g, w)
        return
    assert tuple(got.shape) == tuple(want.shape)
    if want.numel():                      # ember gives empty tensors strides of 0
        assert got.stride() == want.stride()
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    np.testing.assert_array_equal(np.asarray(got.detach()), want.detach().numpy())


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_values(case):
    name, array, args, kwargs = case
    t, e = _pair(array)
    want = getattr(torch, name)(t, *_args(args, kwargs, torch)[0], **_args(args, kwargs, torch)[1])
    got = PUBLIC[name](e, *_args(args, kwargs, ember)[0], **_args(args, kwargs, ember)[1])
    _compare(got, want)


GRAD_CASES = [c for c in CASES if c[0] not in ("detach_copy", "view_as_complex_copy") and not any(
    isinstance(v, str) for v in list(c[2]) + list(c[3].values()))]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[f"{c[0]}-{i}" for i, c in
                                                  enumerate(GRAD_CASES)])
def test_gradients(case):
    name, array, args, kwargs = case
    t, e = _pair(array, "float64")
    t.requires_grad_()
    e.requires_grad_()
    want = getattr(torch, name)(t, *args, **kwargs)
    got = PUBLIC[name](e, *args, **kwargs)
    want = want if isinstance(want, (tuple, list)) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    weights = [np.arange(1.0, w.numel() + 1).reshape(tuple(w.shape)) for w in want]
    if want[0].is_complex():
        weights = [w * (1 - 0.5j) for w in weights]
    sum(torch.sum(w * torch.from_numpy(v)).real for w, v in zip(want, weights)).backward()
    sum(ember.sum(g * ember.tensor(v)).real for g, v in zip(got, weights)).backward()
    np.testing.assert_allclose(np.asarray(e.grad), t.grad.numpy())


ERRORS = [
    ("select_copy", X, (0, 5)), ("select_copy", X, (3, 0)), ("select_copy", X, (0, 1.5)),
    ("select_copy", np.array(1.0), (0, 0)),
    ("diagonal_copy", X, (0, 1, 1)), ("diagonal_copy", X, (0, 0, 3)),
    ("expand_copy", X, ((3, 3),)), ("expand_copy", X, ((3, 3, 4),)),
    ("permute_copy", X, ((0, 0, 1),)),
    ("slice_copy", X, (3,)), ("slice_copy", X, (1, 0, 3, 0)), ("slice_copy", X, (1, 0, 3, -1)),
    ("slice_copy", np.array(1.0), ()), ("slice_copy", X, (0, 1.5)),
    ("split_copy", X, (0, 1)), ("split_copy", X, (-1,)), ("split_copy", X, ([1, 1],)),
    ("split_with_sizes_copy", X, ([1, 1], 1)), ("split_with_sizes_copy", X, (2,)),
    ("squeeze_copy", X, (3,)), ("squeeze_copy", X, (None,)),
    ("t_copy", X, ()), ("transpose_copy", X, (0, 3)),
    ("unbind_copy", X, (3,)), ("unbind_copy", np.array(1.0), ()),
    ("unfold_copy", X, (1, 4, 1)), ("unfold_copy", X, (1, 2, 0)), ("unfold_copy", X, (3, 2, 1)),
    ("unfold_copy", X, (1, -1, 1)),
    ("unsqueeze_copy", X, (4,)), ("unsqueeze_copy", X, (1.0,)),
    ("view_as_complex_copy", X, ()), ("view_as_real_copy", X, ()),
    ("view_copy", X, ((5,),)), ("view_copy", X, ((-1, -1),)), ("view_copy", X, (6,)),
    ("view_copy", X, ("float64",), lambda t: t[..., :3]),
    ("view_copy", X, ("float16",), lambda t: t.transpose(1, 2)),
    ("view_copy", X, ("float64",), lambda t: t[..., 1:3]),
    ("view_copy", X[0, :3, :3], ("float64",), lambda t: t[:, :2]),
    ("view_copy", X, ("int16",), lambda t: t.transpose(1, 2)),
    ("view_copy", np.array(1.0), ("float64",)),
    ("alias_copy", 5, ()),
]


@pytest.mark.parametrize("case", ERRORS, ids=[f"{c[0]}-{i}" for i, c in enumerate(ERRORS)])
def test_errors(case):
    name, array, args = case[:3]
    if isinstance(array, int):
        t = e = array
    else:
        t, e = _pair(array)
        if len(case) > 3:
            t, e = case[3](t), case[3](e)
    with pytest.raises(Exception) as want:
        getattr(torch, name)(t, *_args(args, {}, torch)[0])
    with pytest.raises(want.type) as got:
        PUBLIC[name](e, *_args(args, {}, ember)[0])
    assert str(got.value).replace("ember", "torch") == str(want.value)


def test_out_matches_torch():
    t, e = _pair(X)
    outs = {}
    for lib, x, get in ((torch, t, lambda n: getattr(torch, n)), (ember, e, PUBLIC.get)):
        one = lib.empty(0)
        get("transpose_copy")(x, 0, 2, out=one)
        parts = [lib.empty(2, 3, 2), lib.empty(2, 3, 2, dtype=lib.float64)]
        res = get("split_copy")(x, 2, 2, out=parts)
        outs[lib.__name__] = (one, parts, res)
    _compare(outs["ember"][0], outs["torch"][0])
    _compare(tuple(outs["ember"][1]), outs["torch"][1])
    assert outs["ember"][2] is None and outs["torch"][2] is None
    for lib, x, get in ((torch, t, lambda n: getattr(torch, n)), (ember, e, PUBLIC.get)):
        with pytest.raises(RuntimeError) as info:
            get("t_copy")(x[0], out=lib.empty(4, 3, dtype=lib.int64))
        outs[lib.__name__] = str(info.value)
    assert outs["ember"] == outs["torch"]


@pytest.mark.parametrize("name, args", [("select_copy", (0, 1)), ("slice_copy", ()),
                                        ("t_copy", ()), ("view_as_complex_copy", ())])
def test_complex_results_that_torch_cannot_differentiate(name, args):
    array = X[0, :2, :2] if name == "view_as_complex_copy" else Z
    results = []
    for lib, get in ((torch, lambda n: getattr(torch, n)), (ember, PUBLIC.get)):
        x = _pair(array, "float64")[lib is ember].requires_grad_()
        try:
            results.append(get(name)(x, *args).grad_fn is not None)
        except RuntimeError as e:
            results.append(str(e))
    assert results[1] == results[0]
