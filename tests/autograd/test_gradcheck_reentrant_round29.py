"""gradcheck runs a backward twice over one graph, as PyTorch's does: a backward that draws at
random fails with "Backward is not reentrant" unless within ``nondet_tol``, and one that edits a
tensor it saved fails on the second pass with the in-place error."""

import pytest

import ember


def drifting(lib=ember):
    """A Function whose backward returns a slightly different gradient on every call (shared
    with the round-29 RL parity fixes)."""
    class Drift(lib.autograd.Function):
        calls = 0

        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, g):
            Drift.calls += 1
            return g * (3 + 1e-4 * Drift.calls)
    return Drift


def test_non_reentrant_backward_raises():
    x = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
    with pytest.raises(ember.autograd.GradcheckError,
                       match=r"^Backward is not reentrant, .*gradient\.The tolerance for "
                             r"nondeterminism was 0\.0\.\n\nNOTE: If your op relies on"):
        ember.autograd.gradcheck(drifting().apply, (x,))


def test_non_reentrant_backward_false_or_tolerated():
    x = ember.tensor([1.0, 2.0], dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradcheck(drifting().apply, (x,), raise_exception=False) is False
    assert ember.autograd.gradcheck(drifting().apply, (x,), nondet_tol=1e-2) is True


def test_backward_editing_its_saved_tensor_fails_on_second_pass():
    class Edit(ember.autograd.Function):
        @staticmethod
        def forward(ctx, d):
            r = ember.cumsum(d, 0)
            ctx.save_for_backward(r.clone())
            return r[-1:]

        @staticmethod
        def backward(ctx, g):
            (r,) = ctx.saved_tensors
            r[-1] = 0.0
            return g.expand(r.shape) * ember.ones_like(r)

    d = ember.tensor([0.5, 1.0, 2.0], dtype=ember.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ember.autograd.gradcheck(Edit.apply, (d,))
