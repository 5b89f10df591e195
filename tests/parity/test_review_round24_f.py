"""Review of round 24's forward-AD refusals (helper f), against PyTorch: ``_foreach_lerp``
with a tensor ``weight`` passed by keyword names it as PyTorch's argument parser does, and
the ``weights=`` keyword of its tensor-list overload binds."""

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_same_error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _lists(lib):
    return [lib.ones(3), lib.ones(2)], [lib.zeros(3), lib.full((2,), 4.0)]


@pytest.mark.parametrize("name", ["_foreach_lerp", "_foreach_lerp_"])
@pytest.mark.parametrize("weight", ["requires_grad", "1-dim"])
@pytest.mark.parametrize("keyword", [False, True])
def test_foreach_lerp_tensor_weight_error_names_the_keyword(name, weight, keyword):
    def make(lib):
        if weight == "requires_grad":
            return lib.tensor(0.3, requires_grad=True)
        return lib.tensor([0.3])

    def call(lib, w):
        a, b = _lists(lib)
        fn = getattr(lib, name)
        return fn(a, b, weight=w) if keyword else fn(a, b, w)
    assert_same_error(call, make)


@pytest.mark.parametrize("how", ["weight=number", "weight=0-dim", "weights=tensors"])
def test_foreach_lerp_keyword_weights_compute_as_pytorch(how):
    def run(lib):
        a, b = _lists(lib)
        if how == "weight=number":
            out = lib._foreach_lerp(a, b, weight=0.25)
        elif how == "weight=0-dim":
            out = lib._foreach_lerp(a, b, weight=lib.tensor(0.75))
        else:
            out = lib._foreach_lerp(a, b, weights=[lib.tensor(0.5), lib.tensor([0.1, 0.2])])
        lib._foreach_lerp_(a, b, weight=0.5)
        return [t.numpy() for t in out + tuple(a)]
    for ours, theirs in zip(run(ember), run(torch), strict=True):
        np.testing.assert_array_equal(ours, theirs)
