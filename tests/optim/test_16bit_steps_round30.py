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
    # eps rounds to bfloat16 (add of a scalar); addcdiv multiplies by its value first
    denom = _r(_r(_r(np.sqrt(v)) / f32(math.sqrt(0.001))) + f32(_r(1e-8)))
    want = _r(x + (f32(-(1e-2 / 0.1)) * m) / denom)
    np.testing.assert_array_equal(opt.state[p]["exp_avg"].float().numpy(), m)
    np.testing.assert_array_equal(opt.state[p]["exp_avg_sq"].float().numpy(), v)
    np.testing.assert_array_equal(p.detach().float().numpy(), want)


# RMSprop, Adagrad, NAdam and RAdam on bfloat16 (round 30, third wave): each op in float32
# with its scalar in float32, rounded once; the foreach forms as PyTorch's CPU multi-tensor
# kernels run them. 64 elements: no scalar-loop tail on any vector width.
f32, f64 = np.float32, np.float64


def _b(s):
    """Python float ``s`` rounded to bfloat16, as a float32."""
    return f32(_r(s))


def _lerp(a, b, w):     # lerp_ with weight < 0.5: one fused multiply-add of the difference
    return _r(a.astype(f64) + float(f32(w)) * (b - a).astype(f64))


def _addcmul(a, t1, t2, value):
    return _r(a.astype(f64) + (f32(value) * t1).astype(f64) * t2)


def _addcdiv(a, t1, t2, value):
    return _r(a + (f32(value) * t1) / t2)


def _param(x, g):
    p = ember.nn.Parameter(ember.from_numpy(x).bfloat16())
    p.grad = ember.from_numpy(g).bfloat16()
    return p


def _data(seed, scale=2.0):
    rng = np.random.default_rng(seed)
    return _r(rng.standard_normal(64)), _r(rng.standard_normal(64) * scale)


@pytest.mark.parametrize("foreach", [False, True])
def test_rmsprop_bfloat16_centered_momentum_steps(foreach):
    x, g = _data(5)
    alpha, mom, lr, eps = 0.9, 0.9, 0.01, 1e-3
    p = _param(x, g)
    opt = ember.optim.RMSprop([p], lr=lr, alpha=alpha, eps=eps, momentum=mom, centered=True,
                              foreach=foreach)
    v, gbar, b = (np.zeros(64, f32) for _ in range(3))
    # the CPU _foreach_mul_ rounds its factor to bfloat16 (0.9 -> 0.8984375), mul_ does not
    fa, fm = (_b(alpha), _b(mom)) if foreach else (f32(alpha), f32(mom))
    for _ in range(2):
        opt.step()
        v = _addcmul(_r(v * fa), g, g, 1 - alpha)
        gbar = _lerp(gbar, g, 1 - alpha)
        avg = _r(_r(np.sqrt(_addcmul(v, gbar, gbar, -1))) + _b(eps))
        b = _addcdiv(_r(b * fm), g, avg, 1)
        x = _r(x + _b(-lr) * b)
    state = opt.state[p]
    for got, want in [(p, x), (state["square_avg"], v), (state["grad_avg"], gbar),
                      (state["momentum_buffer"], b)]:
        np.testing.assert_array_equal(got.detach().float().numpy(), want)


@pytest.mark.parametrize("foreach,maximize", [(False, False), (True, False), (True, True)])
def test_adagrad_bfloat16_steps(foreach, maximize):
    x, g = _data(6)
    lr, decay = 0.05, 0.1
    p = _param(x, g)
    opt = ember.optim.Adagrad([p], lr=lr, lr_decay=decay, foreach=foreach, maximize=maximize)
    s, d = np.zeros(64, f32), -g if maximize else g
    for t in (1, 2):
        opt.step()
        rate = lr / (1 + (t - 1) * decay)
        s = _addcmul(s, d, d, 1)
        std = _r(_r(np.sqrt(s)) + _b(1e-10))
        if not foreach:
            x = _addcdiv(x, d, std, -rate)
        else:   # -rate * g first: in place (its factor rounded) when maximize negated g
            x = _addcdiv(x, _r(d * (_b(-rate) if maximize else f32(-rate))), std, 1)
    np.testing.assert_array_equal(p.detach().float().numpy(), x)
    np.testing.assert_array_equal(opt.state[p]["sum"].float().numpy(), s)


@pytest.mark.parametrize("foreach", [False, True])
def test_nadam_bfloat16_first_step(foreach):
    x, g = _data(7)
    lr, beta1, beta2, eps, psi = 0.01, 0.9, 0.999, 1e-3, 4e-3
    p = _param(x, g)
    opt = ember.optim.NAdam([p], lr=lr, eps=eps, foreach=foreach)
    opt.step()
    mu = beta1 * (1 - 0.5 * 0.96 ** psi)
    mu_next = beta1 * (1 - 0.5 * 0.96 ** (2 * psi))
    product = float(f32(mu))
    m = _lerp(np.zeros(64, f32), g, 1 - beta1)
    v = _addcmul(np.zeros(64, f32), g, g, 1 - beta2)
    if foreach:     # the root divided by sqrt(1 - beta2), not its operand by 1 - beta2
        denom = _r(_r(np.sqrt(v)) / f32(math.sqrt(1 - beta2)))
    else:
        denom = _r(np.sqrt(_r(v / f32(1 - beta2))))
    denom = _r(denom + _b(eps))
    x = _addcdiv(x, g, denom, -(lr * (1 - mu) / (1 - product)))
    x = _addcdiv(x, m, denom, -(lr * mu_next / (1 - product * mu_next)))
    np.testing.assert_array_equal(p.detach().float().numpy(), x)
    np.testing.assert_array_equal(opt.state[p]["exp_avg"].float().numpy(), m)


@pytest.mark.parametrize("foreach", [False, True])
def test_radam_bfloat16_unrectified_then_rectified_step(foreach):
    x, g = _data(8)
    lr, beta1, beta2, eps = 0.01, 0.9, 0.999, 1e-3
    p = _param(x, g)
    opt = ember.optim.RAdam([p], lr=lr, eps=eps, foreach=foreach)
    opt.step()      # step 1: rho_t = 1, p -= lr * m / (1 - beta1)
    m = _lerp(np.zeros(64, f32), g, 1 - beta1)
    v = _addcmul(np.zeros(64, f32), g, g, 1 - beta2)
    step = _r(_r(m / f32(1 - beta1)) * f32(lr))
    x = _r(x - step) if not foreach else _addcmul(x, _b(-(lr / (1 - beta1))), m, 1)
    np.testing.assert_array_equal(p.detach().float().numpy(), x)
    opt.state[p]["step"].fill_(99)     # step 100: rectified
    opt.step()
    t = 100
    bc1, bc2 = 1 - beta1 ** t, 1 - beta2 ** t
    rho_inf = 2 / (1 - beta2) - 1
    rho = rho_inf - 2 * t * beta2 ** t / bc2
    rect = math.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
    m = _lerp(m, g, 1 - beta1)
    v = _addcmul(_r(v * (_b(beta2) if foreach else f32(beta2))), g, g, 1 - beta2)
    root = _r(_r(np.sqrt(v)) + _b(eps))
    if foreach:     # one buffer, 1 / (root / -(sqrt(bc2) * lr * rect / bc1)), times m
        buffer = _r(f32(1) / _r(root / f32(-(math.sqrt(bc2) * (lr * rect / bc1)))))
        x = _addcmul(x, buffer, m, 1)
    else:
        adaptive = _r(_r(f32(1) / root) * f32(math.sqrt(bc2)))
        step = _r(_r(_r(_r(m / f32(bc1)) * f32(lr)) * adaptive) * f32(rect))
        x = _r(x - step)
    np.testing.assert_array_equal(p.detach().float().numpy(), x)
    np.testing.assert_array_equal(opt.state[p]["exp_avg_sq"].float().numpy(), v)


# fused=True Adam/AdamW on bfloat16 (round 30, last wave): PyTorch's CPU fused kernel loads
# everything into float32 once, runs the whole step there and rounds only what it stores.
def _fma(a, b, c):
    return (np.asarray(a, f32).astype(f64) * b + c).astype(f32)


def _fused_adam_reference(x, grads, *, lr, beta1, beta2, eps, wd, decoupled, amsgrad):
    """x, m, v(, vmax) after PyTorch's fused CPU Adam on bfloat16 (float32 inside)."""
    m = v = vmax = np.zeros_like(x)
    for t, g in enumerate(grads, 1):
        p = x
        if wd and decoupled:
            p = p * f32(1 - lr * wd)
        elif wd:
            g = _fma(p, f32(wd), g)
        mf = _fma(f32(1 - beta1), g - m, m)
        vf = _fma(f32(1 - beta2) * g, g, v * f32(beta2))
        m, v = _r(mf), _r(vf)
        if amsgrad:
            vf = np.maximum(vmax, vf)
            vmax = _r(vf)
        denom = np.sqrt(vf) / f32(math.sqrt(1 - beta2 ** t)) + f32(eps)
        x = _r(p + f32(-(lr / (1 - beta1 ** t))) * mf / denom)
    return x, m, v, vmax


@pytest.mark.parametrize("cls,amsgrad", [("Adam", False), ("AdamW", True)])
def test_fused_adam_bfloat16_keeps_the_step_in_float32(cls, amsgrad):
    rng = np.random.default_rng(7)
    x = _r(rng.standard_normal(64))
    grads = [_r(rng.standard_normal(64) * (i + 1)) for i in range(4)]
    p = ember.nn.Parameter(ember.from_numpy(x).bfloat16())
    hyper = dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    opt = getattr(ember.optim, cls)([p], amsgrad=amsgrad, fused=True, **hyper)
    for g in grads:
        p.grad = ember.from_numpy(g).bfloat16()
        opt.step()
    want = _fused_adam_reference(x, grads, lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8, wd=0.1,
                                 decoupled=cls == "AdamW", amsgrad=amsgrad)
    np.testing.assert_array_equal(p.detach().float().numpy(), want[0])
    np.testing.assert_array_equal(opt.state[p]["exp_avg"].float().numpy(), want[1])
    np.testing.assert_array_equal(opt.state[p]["exp_avg_sq"].float().numpy(), want[2])
    if amsgrad:
        np.testing.assert_array_equal(opt.state[p]["max_exp_avg_sq"].float().numpy(), want[3])
    # the unfused step rounds each op: it lands elsewhere (the test can tell them apart)
    q = ember.nn.Parameter(ember.from_numpy(x).bfloat16())
    other = getattr(ember.optim, cls)([q], amsgrad=amsgrad, **hyper)
    for g in grads:
        q.grad = ember.from_numpy(g).bfloat16()
        other.step()
    assert (q.detach().float().numpy() != want[0]).any()


def test_fused_adagrad_bfloat16_takes_its_scalars_in_the_dtype():
    # 64 values: all in the vectorized loop, which rounds weight decay, rate and eps to the
    # dtype (PyTorch's fused CPU Adagrad) and keeps the rest of the step in float32
    rng = np.random.default_rng(8)
    x = _r(rng.standard_normal(64))
    grads = [_r(rng.standard_normal(64) * (i + 1)) for i in range(3)]
    p = ember.nn.Parameter(ember.from_numpy(x).bfloat16())
    opt = ember.optim.Adagrad([p], lr=0.05, eps=1e-3, weight_decay=0.1, lr_decay=0.01,
                              fused=True)
    want, s = x, np.zeros_like(x)
    for t, g in enumerate(grads, 1):
        p.grad = ember.from_numpy(g).bfloat16()
        opt.step()
        g = _fma(want, _r(0.1), g)
        sf = _fma(g, g, s)
        s = _r(sf)
        want = _r(want - _r(0.05 / (1 + (t - 1) * 0.01)) * g / (np.sqrt(sf) + _r(1e-3)))
    np.testing.assert_array_equal(opt.state[p]["sum"].float().numpy(), s)
    np.testing.assert_array_equal(p.detach().float().numpy(), want)
