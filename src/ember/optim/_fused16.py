"""PyTorch's CPU ``fused=True`` Adam/AdamW and Adagrad kernels on float16/bfloat16 parameters:
every value is loaded into float32 once, the whole step runs in float32, and only what they
store (parameter, state) rounds back to the dtype; the parameter's update reads the unrounded
float32 state."""

import numpy as np

from ember.backend.cpu_kernels import TORCH_16_BIT_LANES

f32, f64 = np.float32, np.float64


def fmadd(a, b, c):
    """``a * b + c`` of float32 arrays rounded once, as a vector fused multiply-add: the
    product is exact in float64."""
    return (a.astype(f64) * b + c).astype(f32)


def adam_(x, g, m, v, vmax, t, *, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad):
    """One fused Adam (``decoupled``: AdamW) step in place on 16-bit NumPy arrays (``g``
    already negated under ``maximize``)."""
    p, g = x.astype(f32), g.astype(f32)
    if weight_decay:
        if decoupled:
            p = p * f32(1 - lr * weight_decay)
        else:
            g = fmadd(p, f32(weight_decay), g)
    w = f32(1 - beta1)
    mf = m.astype(f32)
    if abs(w) < 0.5:
        mf = fmadd(w, g - mf, mf)
    else:
        mf = fmadd(w - f32(1), g - mf, g)
    # the compiler contracts ``v * beta2 + (1 - beta2) * g * g`` into one multiply-add
    vf = fmadd(f32(1 - beta2) * g, g, v.astype(f32) * f32(beta2))
    m[...], v[...] = mf, vf
    if amsgrad:
        vf = np.maximum(vmax.astype(f32), vf)
        vmax[...] = vf
    denom = np.sqrt(vf) / f32((1 - beta2 ** t) ** 0.5) + f32(eps)
    x[...] = p + f32(-(lr / (1 - beta1 ** t))) * mf / denom


def adagrad_(x, g, s, rate, *, eps, weight_decay):
    """One fused Adagrad step in place on 16-bit NumPy arrays (``rate``: the decayed
    learning rate; ``g`` already negated under ``maximize``). Unlike Adam's, this kernel's
    vectorized loop takes its scalars (weight decay, rate, eps) in the parameter's dtype;
    its scalar tail in float32. That loop steps by one float32 vector (half the 16-bit
    lanes), so the tail is the last ``size % (TORCH_16_BIT_LANES // 2)`` values."""
    body = x.size - x.size % (TORCH_16_BIT_LANES // 2)

    def scalar(v):
        a = np.full(x.size, v, f32)
        a[:body] = a[:body].astype(x.dtype)
        return a.reshape(x.shape)
    p, g = x.astype(f32), g.astype(f32)
    if weight_decay:
        g = fmadd(p, scalar(weight_decay), g)
    sf = fmadd(g, g, s.astype(f32))
    s[...] = sf
    x[...] = p - scalar(rate) * g / (np.sqrt(sf) + scalar(eps))
