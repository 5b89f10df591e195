"""ASGD's steps round as PyTorch's do: the single-tensor step fuses its ``add(alpha=)`` on
float32, and ``foreach=True`` runs PyTorch's multi-tensor algebra (decay folded into the
gradient, ``addcmul`` by the 0-d float32 eta, the average moved by ``addcmul`` with mu even
at 1, eta recomputed in float32 tensor arithmetic). Checked against NumPy references of those
roundings; tests/parity/test_parity_leftovers_round31.py checks the same against PyTorch."""

import math

import numpy as np
import pytest

import ember

f32, f64 = np.float32, np.float64


def _fma(a, b, c):
    """``a * b + c`` of float32 values rounded once."""
    return (f64(1) * a.astype(f64) * f64(b) + c.astype(f64)).astype(f32)


def _reference(x, grads, *, lr, lambd, alpha, t0, wd, foreach):
    x = x.copy()
    ax = np.zeros_like(x)
    eta, mu = f32(lr), f32(1)
    for t, g in enumerate(grads, 1):
        if foreach:
            inter = _fma(x, f32(wd), g) if wd else g
            inter = _fma(x, f32(lambd), inter)
            x = _fma(-inter, eta, x)
            ax = _fma(x - ax, mu, ax)
            base = f32(1) + f32(lambd * lr) * f32(t)
            eta = (f32(1) / f32(math.pow(float(base), alpha))) * f32(lr)
        else:
            if wd:
                g = _fma(x, f32(wd), g)
            x = x * f32(1 - lambd * float(eta))
            x = _fma(g, f32(-float(eta)), x)
            ax = x.copy() if mu == 1 else ax + (x - ax) * mu
            eta = f32(lr / ((1 + lambd * lr * t) ** alpha))
        mu = f32(1 / max(1, t - t0))
    return x, ax, eta


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("wd", [0, 0.1])
def test_asgd_float32_matches_reference_bitwise(foreach, wd):
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal(37).astype(f32)
    grads = [rng.standard_normal(37).astype(f32) for _ in range(8)]
    kw = dict(lr=0.05, lambd=0.05, alpha=0.75, t0=3)
    p = ember.nn.Parameter(ember.from_numpy(x0.copy()))
    opt = ember.optim.ASGD([p], weight_decay=wd, foreach=foreach, **kw)
    for g in grads:
        p.grad = ember.from_numpy(g)
        opt.step()
    x, ax, eta = _reference(x0, grads, wd=wd, foreach=foreach, **kw)
    np.testing.assert_array_equal(p.detach().numpy(), x)
    np.testing.assert_array_equal(opt.state[p]["ax"].numpy(), ax)
    assert opt.state[p]["eta"].item() == float(eta)


def test_asgd_foreach_differs_from_single_as_in_torch():
    """The two algebras round differently: the foreach step is not the single one's."""
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal(200).astype(f32)
    out = []
    for foreach in (False, True):
        p = ember.nn.Parameter(ember.from_numpy(x0.copy()))
        opt = ember.optim.ASGD([p], lr=0.1, lambd=0.1, foreach=foreach)
        for k in range(5):
            p.grad = ember.from_numpy(np.cos(x0 * (k + 1)).astype(f32))
            opt.step()
        out.append(p.detach().numpy().copy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-5, atol=1e-6)
    assert (out[0] != out[1]).any()
