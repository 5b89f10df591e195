"""torch.func against PyTorch (audit round 11): how a TreeSpec is written (vmap's in_dims and
out_dims errors show it) and the errors of has_aux transforms."""

import collections

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

Pair = collections.namedtuple("Pair", "a b")
TREES = [(1, 2, 3), {"a": 1, "b": (2, [3, {"c": 4, "d": 5}])}, [Pair(1, 2), 3], (), [1],
         {"x": []}]


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_treespec_repr(tree):
    want = repr(torch.utils._pytree.tree_structure(tree))
    assert repr(ember.utils._pytree.tree_structure(tree)) == want


def _message(lib, fn):
    with pytest.raises(Exception) as info:
        fn(lib)
    return type(info.value), str(info.value).replace("torch.", "ember.")


@pytest.mark.parametrize("fn", [
    lambda L: L.func.vmap(lambda a, b: a + b, in_dims=(0,))(L.ones(2), L.ones(2)),
    lambda L: L.func.vmap(lambda d: d["a"], in_dims=({"a": 0, "c": None},))(
        {"a": L.ones(3, 2), "b": L.ones(2)}),
    lambda L: L.func.vmap(lambda a: (a, a), out_dims=(0,))(L.ones(3, 2)),
    lambda L: L.func.grad(lambda x: (x.sum(), 3), has_aux=True)(L.ones(2)),
    lambda L: L.func.vjp(lambda x: (x.sin(), None), L.ones(2), has_aux=True),
    lambda L: L.func.grad(lambda x: (x * 1j).sum())(L.ones(2)),
    lambda L: L.func.vmap(L.histc)(L.ones(0, 3)),
    lambda L: L.func.stack_module_state([L.nn.Linear(2, 2), L.nn.ReLU()]),
    lambda L: L.func.jacfwd(lambda x: x * L.rand(2))(L.ones(2)),
    lambda L: L.func.hessian(lambda x: (x * L.randn(2)).sum())(L.ones(2)),
], ids=["in_dims_len", "in_dims_dict", "out_dims_len", "grad_aux", "vjp_aux", "grad_complex",
        "empty_batch_fallback", "stack_different_classes", "jacfwd_random", "hessian_random"])
def test_error_matches_torch(fn):
    assert _message(ember, fn) == _message(torch, fn)
