"""Adafactor and Adam on bfloat16 parameters round each op's result to bfloat16 as PyTorch's
kernels do, their scalars kept in float32 (checked against NumPy references of those roundings;
tests/parity/test_parity_programs_round30_llm_fixes.py checks the same against PyTorch)."""

import math

import ml_dtypes
import numpy as np
import pytest

import ember


def _r(a):
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _norm(a, axis=None):
    return _r(np.sqrt((a * a).sum(axis=axis, keepdims=axis is not None)))


def _reference_first_step(x, g, lr=0.01, eps2=1e-3):
    """One step from zero state on a tensor small enough that PyTorch runs it all in its
    scalar loop (the root rounded before it is inverted, the scaled update before the add)."""
    eps1 = 2.0 ** -7
    alpha = max(eps2, float(_norm(x)) / math.sqrt(x.size)) * min(lr, 1.0)
    if x.ndim >= 2:
        row = _r(_r(_norm(g, -1) ** 2) / g.shape[-1])
        col = _r(_r(_norm(g, -2) ** 2) / g.shape[-2])
        var = _r(_r(row * col) / np.maximum(_r(row.mean(-2, keepdims=True)), eps1))
        state = {"row_var": row, "col_var": col}
    else:
        var = _r(g * g)
        state = {"variance": var}
    u = _r(1 / _r(np.sqrt(np.maximum(var, eps1 * eps1))))
    u = _r(u * g)
    step = -alpha / max(1.0, float(_norm(u)) / math.sqrt(u.size))
    return _r(x + _r(_r(step) * u)), state


@pytest.mark.parametrize("shape", [(5,), (2, 3), (3, 2, 2)])
def test_adafactor_bfloat16_first_step_rounds_like_torch(shape):
    rng = np.random.default_rng(3)
    x = _r(rng.standard_normal(shape) * 3)
    g = _r(rng.standard_normal(shape) * 5)
    p = ember.nn.Parameter(ember.from_numpy(x).bfloat16())
    p.grad = ember.from_numpy(g).bfloat16()
    opt = ember.optim.Adafactor([p])
    opt.step()
    want, state = _reference_first_step(x, g)
    np.testing.assert_array_equal(p.detach().float().numpy(), want)
    for key, value in state.items():
        np.testing.assert_array_equal(opt.state[p][key].float().numpy(), value)


@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
def test_adam_bfloat16_first_step_keeps_scalars_in_float32(cls):
    rng = np.random.default_rng(4)
    x = _r(rng.standard_normal(40))
    g = _r(rng.standard_normal(40) * 2)
    p = ember.nn.Parameter(ember.from_numpy(x).bfloat16())
    p.grad = ember.from_numpy(g).bfloat16()
    opt = getattr(ember.optim, cls)([p], lr=1e-2, weight_decay=0.0)
    opt.step()
    f32 = np.float32
    m = _r(f32(0.1) * g)
    v = _r((f32(0.001) * g).astype(np.float64) * g)
    denom = _r(_r(_r(np.sqrt(v)) / f32(math.sqrt(0.001))) + f32(1e-8))
    want = _r(x + f32(-(1e-2 / 0.1)) * (m / denom))
    np.testing.assert_array_equal(opt.state[p]["exp_avg"].float().numpy(), m)
    np.testing.assert_array_equal(opt.state[p]["exp_avg_sq"].float().numpy(), v)
    np.testing.assert_array_equal(p.detach().float().numpy(), want)
