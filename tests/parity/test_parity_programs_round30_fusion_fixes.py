"""What the fusion programs of round 30 (test_parity_programs_round30_fusion.py and its _causal
sibling) and their probes found, each pinned against PyTorch: making a strided nested tensor
(LLaVA-style packing of variable-length image tokens) gave no warning, where PyTorch warns once
that the strided nested-tensor API is a prototype (every time under set_warn_always), from
nested_tensor, as_nested_tensor of a list, clone, detach and to, but not from as_nested_tensor of
a dense tensor or from the jagged layout."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_A = np.arange(6, dtype=np.float32).reshape(2, 3)
_B = np.ones((1, 3), dtype=np.float32)

_MAKERS = {
    "nested_tensor": lambda lib, a, b: lib.nested.nested_tensor([a, b]),
    "strided_layout": lambda lib, a, b: lib.nested.nested_tensor([a, b], layout=lib.strided),
    "as_nested_list": lambda lib, a, b: lib.nested.as_nested_tensor([a, b]),
    "as_nested_grad": lambda lib, a, b: lib.nested.as_nested_tensor(
        [a.requires_grad_(), b.requires_grad_()]),
    "as_nested_dense": lambda lib, a, b: lib.nested.as_nested_tensor(lib.stack([a[:1], b])),
    "jagged": lambda lib, a, b: lib.nested.nested_tensor([a, b], layout=lib.jagged),
    "jagged_as_nested": lambda lib, a, b: lib.nested.as_nested_tensor([a, b], layout=lib.jagged),
    "from_jagged": lambda lib, a, b: lib.nested.nested_tensor_from_jagged(
        lib.cat([a, b]), lib.tensor([0, 2, 3])),
}


def _warnings(lib, fn):
    a, b = lib.from_numpy(_A.copy()), lib.from_numpy(_B.copy())
    was = lib.is_warn_always_enabled()
    lib.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = fn(lib, a, b)
    finally:
        lib.set_warn_always(was)
    return out, [(w.category.__name__, str(w.message).split(" (Triggered")[0]) for w in caught]


@pytest.mark.parametrize("maker", list(_MAKERS), ids=str)
def test_nested_constructors_warn_like_torch(maker):
    (ours, ours_w), (theirs, theirs_w) = (_warnings(lib, _MAKERS[maker]) for lib in (ember, torch))
    assert ours_w == theirs_w
    np.testing.assert_array_equal(ours.to_padded_tensor(-1.0).detach().numpy(),
                                  theirs.to_padded_tensor(-1.0).detach().numpy())


@pytest.mark.parametrize("method", ["clone", "detach", "to_double", "unbind"])
def test_nested_methods_warn_like_torch(method):
    def fn(lib, a, b):
        nt = lib.nested.nested_tensor([a, b])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = (nt.to(lib.float64) if method == "to_double" else getattr(nt, method)())
        return out, [str(w.message)[:40] for w in caught]
    (ours, ours_w), _ = _warnings(ember, fn)
    (theirs, theirs_w), _ = _warnings(torch, fn)
    assert ours_w == theirs_w
    assert len(theirs_w) == (0 if method == "unbind" else 1)


def test_nested_warning_is_once_without_warn_always():
    def count(lib):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                lib.nested.nested_tensor([lib.ones(2, 3), lib.ones(1, 3)])
        return sum("prototype stage" in str(w.message) for w in caught)
    assert count(ember) <= 1 and count(torch) <= 1
