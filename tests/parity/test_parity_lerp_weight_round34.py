"""lerp's gradients vs PyTorch for every subset of (input, end, weight) requiring grad,
broadcast weights, complex and in place; Adam(differentiable=True) with learnable betas
(round 34 review)."""

import itertools
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_SHAPES = [((2, 3), (2, 3), ()), ((2, 3), (3,), (2, 1)), ((3,), (2, 3), (1, 3)),
           ((2, 3), (2, 3), (1,)), ((1, 3), (2, 1), (2, 3)), ((0, 3), (0, 3), ()),
           ((), (), ())]


def _values(shape, shift, complex_):
    n = int(np.prod(shape)) if shape else 1
    a = (np.arange(n, dtype=np.float64).reshape(shape) * 0.37 + shift)
    return a * (1 + 0.5j) if complex_ else a


def _grads(lib, arrays, need, inplace, complex_):
    dt = lib.complex128 if complex_ else lib.float64
    ts = [lib.tensor(a, dtype=dt).requires_grad_(bool(r)) for a, r in zip(arrays, need)]
    if inplace:
        out = ts[0].detach().clone()
        out.lerp_(ts[1], ts[2])
    else:
        out = lib.lerp(*ts)
    up = lib.tensor(np.full(tuple(out.shape), 1.5 + (0.3j if complex_ else 0)), dtype=dt)
    loss = (out * up).sum()
    (loss.real if complex_ else loss).backward()
    return [None if t.grad is None else t.grad.detach().numpy() for t in ts]


@pytest.mark.parametrize("shapes", _SHAPES)
@pytest.mark.parametrize("need", [n for n in itertools.product((0, 1), repeat=3) if any(n)])
@pytest.mark.parametrize("complex_", [False, True])
def test_lerp_grads_match_torch(shapes, need, complex_):
    arrays = [_values(s, k, complex_) for s, k in zip(shapes, (1.0, -2.0, 0.2))]
    inplace_ok = np.broadcast_shapes(*shapes) == tuple(shapes[0]) and not need[0]
    for inplace in (False, True) if inplace_ok else (False,):
        ours = _grads(ember, arrays, need, inplace, complex_)
        theirs = _grads(torch, arrays, need, inplace, complex_)
        for a, b in zip(ours, theirs):
            assert (a is None) == (b is None)
            if a is not None:
                assert a.shape == b.shape
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def _adam(lib, opt, amsgrad, lr_tensor, beta2_grad):
    f64 = lib.float64
    w0 = lib.tensor([[0.5, -1.0, 2.0], [0.3, 0.1, -0.7]], dtype=f64, requires_grad=True)
    b1 = lib.tensor(0.9, dtype=f64, requires_grad=True)
    b2 = lib.tensor(0.99, dtype=f64, requires_grad=beta2_grad)
    lr = lib.tensor(0.01, dtype=f64, requires_grad=True) if lr_tensor else 0.01
    p = w0 * 1
    o = getattr(lib.optim, opt)([p], lr=lr, betas=(b1, b2), differentiable=True,
                                amsgrad=amsgrad, weight_decay=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p.grad = (p * p).detach() + 0.3
        o.step()
        state = {k: (v if k == "step" else v.detach().clone()) for k, v in o.state[p].items()}
        p2 = w0 * 1
        del o.state[p]
        o.state[p2] = state
        o.param_groups[0]["params"] = [p2]
        p2.grad = w0 * w0 * 2 + 0.5
        o.step()
    p2.sum().backward()
    return [t.detach().numpy() for t in (p2, w0.grad, b1.grad)
            ] + [t.grad.detach().numpy() for t, on in ((b2, beta2_grad), (lr, lr_tensor)) if on]


@pytest.mark.parametrize("opt", ["Adam", "AdamW"])
@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("lr_tensor,beta2_grad", [(False, True), (True, True), (True, False)])
def test_differentiable_adam_learnable_betas_match_torch(opt, amsgrad, lr_tensor, beta2_grad):
    ours = _adam(ember, opt, amsgrad, lr_tensor, beta2_grad)
    theirs = _adam(torch, opt, amsgrad, lr_tensor, beta2_grad)
    assert len(ours) == len(theirs) == 3 + lr_tensor + beta2_grad
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert np.abs(ours[2]) > 1e-3      # beta1's gradient flows (through lerp_'s weight)


@pytest.mark.parametrize("opt,kw", [("Adam", {}), ("Adam", {"amsgrad": True}), ("AdamW", {})])
def test_differentiable_adam_ends_in_addcdiv_as_torch(opt, kw):
    def last(lib):
        p = lib.ones(3, requires_grad=True) * 1
        o = getattr(lib.optim, opt)([p], lr=0.1, differentiable=True, **kw)
        p.grad = lib.tensor([1.0, -2.0, 3.0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            o.step()
        return p.grad_fn.name(), p.detach().numpy()
    (ours, a), (theirs, b) = last(ember), last(torch)
    assert ours == theirs == "AddcdivBackward0"
    np.testing.assert_array_equal(a, b)
