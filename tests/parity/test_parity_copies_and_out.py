"""Copies' strides, ``numpy()`` of bfloat16/float8, ``F.*(out=)`` and the range factories'
``out=`` against PyTorch. Skipped when PyTorch is not installed."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


# views whose copies PyTorch lays out by stride order (not dense: permuted and expanded,
# transposed after expanding, stepped) or keeps exactly (dense, odd size-1 strides; empty)
_VIEWS = {
    "permute": lambda m: m.arange(24.).reshape(2, 3, 4).permute(1, 2, 0),
    "expand_permute": lambda m: m.arange(6.).reshape(2, 3).unsqueeze(1).expand(2, 5, 3)
    .permute(2, 0, 1),
    "expand_permute2": lambda m: m.arange(6.).reshape(2, 3).unsqueeze(1).expand(2, 5, 3)
    .permute(1, 2, 0),
    "expand_transpose": lambda m: m.arange(6.).reshape(2, 3).unsqueeze(1).expand(2, 5, 3)
    .transpose(0, 2),
    "transpose_expand": lambda m: m.arange(6.).reshape(2, 3).t().unsqueeze(0).expand(4, 3, 2),
    "permute_slice_expand": lambda m: m.arange(24.).reshape(2, 3, 4).permute(2, 0, 1)[:, :1]
    .expand(4, 5, 3),
    "step": lambda m: m.arange(24.).reshape(2, 3, 4)[:, :, ::2].permute(2, 0, 1),
    "size1": lambda m: m.arange(3.).reshape(3, 1).t(),
    "size1_permute": lambda m: m.arange(6.).reshape(1, 2, 1, 3).permute(3, 1, 2, 0),
    "size1_odd_column": lambda m: m.arange(8.).as_strided((3, 1), (1, 5)),
    "size1_odd_row": lambda m: m.arange(8.).as_strided((1, 3), (9, 1)),
    "size1_odd_all": lambda m: m.arange(8.).as_strided((1, 1), (5, 7)),
    "size1_unsqueeze_transpose": lambda m: m.arange(6.).reshape(2, 3).unsqueeze(0)
    .transpose(0, 2),
    "empty_transpose": lambda m: m.zeros(0, 3).t(),
    "empty_expand": lambda m: m.zeros(1, 0).expand(2, 0),
    "empty_permute": lambda m: m.zeros(2, 3, 0).permute(2, 0, 1),
    "empty_as_strided": lambda m: m.zeros(4).as_strided((2, 0, 3), (1, 2, 0)),
}
_COPIES = {
    "clone": lambda t, m: t.clone(),
    "clone_preserve": lambda t, m: t.clone(memory_format=m.preserve_format),
    "to_dtype": lambda t, m: t.to(m.float64),
    "half": lambda t, m: t.half(),
    "empty_like": lambda t, m: m.empty_like(t),
    "full_like": lambda t, m: m.full_like(t, 2.0),
    "zeros_like": lambda t, m: m.zeros_like(t),
}


@pytest.mark.parametrize("copy", sorted(_COPIES))
@pytest.mark.parametrize("view", sorted(_VIEWS))
def test_copy_strides_match(view, copy):
    ours = _COPIES[copy](_VIEWS[view](ember), ember)
    theirs = _COPIES[copy](_VIEWS[view](torch), torch)
    assert ours.stride() == theirs.stride()
    if copy != "empty_like":
        assert ours.tolist() == theirs.tolist()


_VIEWS_OF_EMPTY_AND_SIZE1 = {
    "t": lambda m: m.zeros(0, 3).t(),
    "mT": lambda m: m.zeros(2, 0, 3).mT,
    "permute": lambda m: m.zeros(2, 0, 3).permute(2, 0, 1),
    "movedim": lambda m: m.zeros(2, 0, 3).movedim(0, 2),
    "expand": lambda m: m.zeros(0).expand(2, 0),
    "unsqueeze_inner": lambda m: m.arange(6.).reshape(2, 3).t().unsqueeze(2),
    "unsqueeze_outer": lambda m: m.arange(6.).reshape(2, 3).t().unsqueeze(0),
    "unsqueeze_sliced": lambda m: m.arange(6.).reshape(2, 3)[:, :1].unsqueeze(2),
    "unsqueeze_empty": lambda m: m.zeros(0, 3).t().unsqueeze(0),
    "unsqueeze_0d": lambda m: m.tensor(1.).unsqueeze(0),
}


@pytest.mark.parametrize("view", sorted(_VIEWS_OF_EMPTY_AND_SIZE1))
def test_view_strides_match(view):
    """Strides PyTorch's copies keep: those of empty tensors' views, and of size-1 dims."""
    ours, theirs = (_VIEWS_OF_EMPTY_AND_SIZE1[view](m) for m in (ember, torch))
    assert ours.stride() == theirs.stride()
    assert ours.clone().stride() == theirs.clone().stride()


def test_contiguous_preserve_format_refuses_a_strided_tensor():
    for m in (torch, ember):
        t = m.arange(6.).reshape(2, 3)
        assert t.contiguous(memory_format=m.preserve_format) is t
        with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
            t.t().contiguous(memory_format=m.preserve_format)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_numpy_refuses_dtypes_numpy_lacks(name):
    for m in (torch, ember):
        t = m.ones(2, dtype=getattr(m, name))
        for convert in (lambda: t.numpy(), lambda: t.numpy(force=True),
                        lambda: np.asarray(t), lambda: np.array(t),
                        lambda: np.array(t, dtype=np.float32), lambda: t + np.ones(2)):
            with pytest.raises(TypeError, match="Got unsupported ScalarType"):
                convert()
        assert t.tolist() == [1.0, 1.0]


_OUT_CASES = {
    "gelu": lambda m: ((m.linspace(-2, 2, 5),), {"approximate": "tanh"}),
    "softshrink": lambda m: ((m.linspace(-2, 2, 5),), {}),
    "softplus": lambda m: ((m.linspace(-2, 2, 5),), {}),
    "logsigmoid": lambda m: ((m.linspace(-2, 2, 5),), {}),
    "linear": lambda m: ((m.arange(6.).reshape(2, 3), m.ones(4, 3), m.arange(4.)), {}),
    "avg_pool2d": lambda m: ((m.arange(32.).reshape(1, 2, 4, 4), 2), {}),
    "avg_pool3d": lambda m: ((m.arange(64.).reshape(1, 1, 4, 4, 4), 2), {}),
}


@pytest.mark.parametrize("name", sorted(_OUT_CASES))
def test_functional_out(name):
    results = []
    for m in (torch, ember):
        args, kwargs = _OUT_CASES[name](m)
        buf = m.empty(0)
        got = getattr(m.nn.functional, name)(*args, out=buf, **kwargs)
        assert got is buf
        with pytest.raises(RuntimeError) as info:
            getattr(m.nn.functional, name)(*args, out=m.empty(0, dtype=m.float64), **kwargs)
        results.append((buf.tolist(), str(info.value)))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5, atol=1e-6)
    assert results[1][1] == results[0][1]


@pytest.mark.parametrize("factory", ["arange", "linspace", "logspace"])
def test_range_out_of_same_numel_keeps_its_shape(factory):
    made = []
    for m in (torch, ember):
        out = m.ones(2, 3)
        args = (6.0,) if factory == "arange" else (0.0, 1.0, 6)
        getattr(m, factory)(*args, out=out)
        made.append((tuple(out.shape), out.tolist()))
    assert made[1][0] == made[0][0] == (2, 3)
    np.testing.assert_allclose(made[1][1], made[0][1], rtol=1e-6)


def test_arange_warns_when_it_resizes_a_nonempty_out():
    texts = []
    for m in (torch, ember):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = m.ones(7, dtype=m.int64)
            m.arange(5, out=out)
            m.arange(3, out=m.ones(0, dtype=m.int64))      # an empty out: no warning
        assert out.tolist() == [0, 1, 2, 3, 4]
        assert [w.filename for w in caught] == [__file__]
        texts.append(str(caught[0].message).split(" (Triggered")[0])
    assert texts[1] == texts[0]
