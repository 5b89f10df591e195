"""vmap's fallback warning for in-place ops names PyTorch's in-place overload
(``aten::scatter_.value``, ``aten::fmod_.Scalar``) and fires exactly where PyTorch's vmap has no
in-place batching rule (values and names read off torch 2.13)."""

import warnings

import numpy as np
import pytest

import ember

X = np.array([[-1.0, 0.0, 1.0, 2.0]] * 3, dtype=np.float32)


def _run(fn):
    x, i = ember.from_numpy(X.copy()), ember.tensor([[1], [2], [0]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = ember.func.vmap(fn)(x, i)
    names = [str(w.message).split("batching rule for ")[1].split(". Please")[0]
             for w in caught if "performance drop" in str(w.message)]
    return out.numpy(), names


@pytest.mark.parametrize("fn,name", [
    (lambda a, j: ember.zeros_like(a).scatter_(0, j, 1.0), "aten::scatter_.value"),
    (lambda a, j: ember.zeros_like(a).scatter_(0, j, a[:1]), "aten::scatter_.src"),
    (lambda a, j: ember.zeros_like(a).scatter_(0, j, a[:1], reduce="add"),
     "aten::scatter_.reduce"),
    (lambda a, j: a.clone().masked_fill_(a > 0, a.sum()), "aten::masked_fill_.Tensor"),
    (lambda a, j: a.clone().index_copy_(0, j[0], a[:1]), "aten::index_copy_"),
    (lambda a, j: a.view(2, 2).clone().fill_diagonal_(5.0), "aten::fill_diagonal_"),
    (lambda a, j: a.clone().fmod_(2.0), "aten::fmod_.Scalar"),
    (lambda a, j: a.clone().lerp_(a * 2, 0.3), "aten::lerp_.Scalar"),
    (lambda a, j: a.clone().abs().xlogy_(2.0), "aten::xlogy_.Scalar_Other"),
    (lambda a, j: a.clone().abs().pow_(a.abs()), "aten::pow_.Tensor"),
    (lambda a, j: a.clone().clamp_(0, 1), "aten::clamp_"),
    (lambda a, j: a.clone().addcmul_(a, a, value=2), "aten::addcmul_"),
])
def test_fallback_names_the_inplace_overload(fn, name):
    assert _run(fn)[1] == [name]


def test_inplace_ops_torch_batches_do_not_warn():
    out, names = _run(lambda a, j: a.clone().masked_fill_(a > 0, 1.0).index_fill_(0, j[0], 7.0)
                      .pow_(2.0).mul_(2))
    assert names == []
    expected = np.where(X > 0, 1.0, X)
    expected[np.arange(3), [1, 2, 0]] = 7.0
    np.testing.assert_allclose(out, expected ** 2 * 2)
    for fn in (lambda a, j: a.clone().index_add_(0, j[0], a[:1]),
               lambda a, j: a.clone().scatter_add_(0, j, a[:1]),
               lambda a, j: a.clone().scatter_reduce_(0, j, a[:1], "sum")):
        out, names = _run(fn)
        assert names == []
        np.testing.assert_allclose(out, X + np.eye(4, dtype=np.float32)[[1, 2, 0]] * X[:, :1])
