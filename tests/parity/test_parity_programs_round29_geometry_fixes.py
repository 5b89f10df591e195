"""What the geometry and graph programs of round 29 (test_parity_programs_round29_geometry.py and
its _robotics and _graphs siblings) found, each pinned against PyTorch: sparse products under
vmap (a graph's features propagated per example by ``vmap(lambda f: sparse.mm(A, f))``) gave
zeros, as the product read the batched operand's placeholder, and ``vmap(lambda v: v @ A)``
was refused; now they give PyTorch's values, gradients (into the dense operand and into the
sparse values) and fallback warnings."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_X = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4) / 7 - 1


def _adjacency(lib, layout="coo", values=None):
    values = lib.tensor([2.0, -3.0, 4.0, 0.5]) if values is None else values
    s = lib.sparse_coo_tensor(lib.tensor([[0, 1, 1, 2], [1, 0, 2, 2]]), values, (3, 3))
    return s.to_sparse_csr() if layout == "csr" else s


def _run(lib, fn):
    """``fn(lib)`` as plain lists, with the (category, message) pairs it warned with."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(lib)
    shown = [(w.category.__name__, str(w.message).split(" (Triggered")[0]) for w in caught
             if "invariant" not in str(w.message) and "beta state" not in str(w.message)]
    return out, shown


def _same(fn):
    (ours, ours_w), (theirs, theirs_w) = _run(ember, fn), _run(torch, fn)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-6)
    assert ours_w == theirs_w
    return theirs, theirs_w


@pytest.mark.parametrize("layout", ["coo", "csr"])
@pytest.mark.parametrize("in_dims", [0, 1, 2])
def test_vmap_sparse_mm_like_torch(layout, in_dims):
    def fn(lib):
        x = lib.from_numpy(np.moveaxis(_X, 0, in_dims).copy())
        return [lib.vmap(lambda v: lib.sparse.mm(_adjacency(lib, layout), v), in_dims=in_dims)(x)]
    out, shown = _same(fn)
    assert out[0].abs().sum() > 0
    assert len(shown) == 1 and "aten::_sparse_mm" in shown[0][1]


def test_vmap_sparse_addmm_and_out_dims_like_torch():
    def fn(lib):
        x = lib.from_numpy(_X)
        return [lib.vmap(lambda v: lib.sparse.addmm(v, _adjacency(lib), v, beta=0.5,
                                                    alpha=2.0))(x),
                lib.vmap(lambda v: lib.sparse.mm(_adjacency(lib), v), out_dims=2)(x)]
    _, shown = _same(fn)
    assert [m for _, m in shown if "_sparse_addmm" in m]


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax"])
def test_vmap_sparse_mm_reduce_like_torch(reduce):
    def fn(lib):
        x = lib.from_numpy(_X).requires_grad_(True)
        y = lib.vmap(lambda v: lib.sparse.mm(_adjacency(lib, "csr"), v, reduce))(x)
        (y * y).sum().backward()
        return [y, x.grad]
    _same(fn)


def test_vmap_sparse_mv_like_torch():
    def fn(lib):
        return [lib.vmap(lambda v: lib.mv(_adjacency(lib), v))(lib.from_numpy(_X[:, :, 0].copy()))]
    _, shown = _same(fn)
    assert shown == []          # mv has a batching rule in PyTorch: no fallback warning


def test_vmap_sparse_mm_gradients_like_torch():
    def fn(lib):
        vals = lib.tensor([2.0, -3.0, 4.0, 0.5], requires_grad=True)
        x = lib.from_numpy(_X).requires_grad_(True)
        y = lib.vmap(lambda v: lib.sparse.mm(_adjacency(lib, values=vals), v))(x)
        (y * y).sum().backward()
        return [y, x.grad, vals.grad]
    _same(fn)


def test_nested_vmap_sparse_mm_warns_per_fallback_call_like_torch():
    def fn(lib):
        x = lib.from_numpy(_X)
        inner = lib.vmap(lambda v: lib.sparse.mm(_adjacency(lib), v[:, None]))
        return [lib.vmap(inner, in_dims=2)(x)]
    _, shown = _same(fn)
    assert len(shown) == 1 + 2      # the innermost call, then once per example of it


def test_vmap_sparse_mm_empty_batch_like_torch():
    def fn(lib):
        with pytest.raises(RuntimeError) as info:
            lib.vmap(lambda v: lib.sparse.mm(_adjacency(lib), v))(lib.zeros(0, 3, 4))
        return str(info.value)
    (ours, ours_w), (theirs, theirs_w) = _run(ember, fn), _run(torch, fn)
    assert ours == theirs and ours_w == theirs_w


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_vmap_dense_times_sparse_like_torch(layout):
    def fn(lib):
        vals = lib.tensor([2.0, -3.0, 4.0, 0.5], requires_grad=True)
        x = lib.from_numpy(_X.transpose(0, 2, 1).copy()).requires_grad_(True)   # (2, 4, 3)
        s = _adjacency(lib, layout, vals)
        y = lib.vmap(lambda v: v @ s)(x)
        y1 = lib.vmap(lambda v: v[0] @ s)(x)
        y2 = lib.vmap(lambda v: lib.mm(v, s))(x)
        ((y * y).sum() + y1.sum() + y2.pow(3).sum()).backward()
        return [y, y1, y2, x.grad, vals.grad]
    _, shown = _same(fn)
    assert shown == []
