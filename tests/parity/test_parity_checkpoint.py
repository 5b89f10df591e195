"""utils.checkpoint against PyTorch: gradients of both variants (with autograd.grad on
closed-over weights for the non-reentrant one), and the CheckpointError a recomputation that
saves fewer tensors, or other dtypes, raises (unary chains, which save as many tensors in
both libraries)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

W = np.random.default_rng(0).standard_normal((5, 5))


def _grads(lib, reentrant):
    w = lib.tensor(W, requires_grad=True)
    x = lib.tensor(W[0], requires_grad=True)

    def block(a):
        return lib.tanh(a @ w).exp().sin()
    out = lib.utils.checkpoint.checkpoint(block, x, use_reentrant=reentrant).sum()
    if reentrant:
        out.backward()
        return w.grad.numpy(), x.grad.numpy()
    return tuple(g.numpy() for g in lib.autograd.grad(out, (w, x)))


@pytest.mark.parametrize("reentrant", [False, True])
def test_gradients_match(reentrant):
    for ours, theirs in zip(_grads(ember, reentrant), _grads(torch, reentrant)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10)


def _first_paragraph(lib, change):
    flag = [True]

    def fn(a):
        b = a.sin()
        if flag[0]:
            b = b.exp() if change == "count" else b.double()
        return b.cos()
    x = lib.ones(3, requires_grad=True)
    out = lib.utils.checkpoint.checkpoint(fn, x, use_reentrant=False)
    flag[0] = False
    with pytest.raises(Exception) as info:
        out.sum().backward()
    text = str(info.value).split("\n\nTip")[0]
    return type(info.value).__name__, text.replace("torch.", "").replace("ember.", "")


@pytest.mark.parametrize("change", ["count", "dtype"])
def test_checkpoint_errors_match(change):
    assert _first_paragraph(ember, change) == _first_paragraph(torch, change)
