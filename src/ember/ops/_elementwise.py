"""Helpers that declare elementwise ops in one line each (forward, derivative, in-place)."""

import functools

from ember import _dtype as D
from ember._tensor import Tensor
from ember.autograd.grad_mode import STATE as _GRAD
from ember.ops._promotion import FLOAT
from ember.ops._registry import op

__all__ = ["unary", "binary", "conj_grad", "zeros_for", "fused_for_half"]


def unary(signature, forward, derivative=None, *, doc, promote=FLOAT, saves_inputs=True,
          ufunc=None, inplace=True, scalars=False, **options):
    """Register a one-input elementwise op; ``ufunc`` also gives a copy-free in-place variant.

    ``derivative(grad, x[, out=])`` returns the input gradient. As in PyTorch the input must
    be a tensor (``ember.exp(2.0)`` is a TypeError).
    """
    forward.__doc__ = doc
    new = op(signature, promote=promote, saves_inputs=saves_inputs, inplace=inplace,
             scalars=scalars, **{"pointwise": True, **options})(forward)
    if derivative is not None:
        new.derivative(derivative)
    if ufunc is not None and inplace:
        new.inplace_variant(lambda xp, dst, a: getattr(xp, ufunc)(a, out=dst, casting="unsafe"))
    return new


def binary(signature, forward, derivative=None, *, doc, promote, saves_inputs=True,
           ufunc=None, inplace=True, **options):
    """Register a two-input elementwise op (either input may be a Python number)."""
    forward.__doc__ = doc
    new = op(signature, inputs=2, promote=promote, saves_inputs=saves_inputs,
             inplace=inplace, **{"pointwise": True, **options})(forward)
    if derivative is not None:
        new.derivative(derivative)
    if ufunc is not None and inplace:
        new.inplace_variant(
            lambda xp, dst, a, b: getattr(xp, ufunc)(a, b, out=dst, casting="unsafe"))
    return new


def zeros_for(grad):
    """The gradient of a piecewise-constant function: zeros shaped as ``grad`` (``grad * 0``
    would turn its infinities into NaN, which PyTorch's zeros never carry)."""
    return grad.new_zeros(grad.shape)


def conj_grad(t):
    """``t.conj()`` for complex tensors, ``t`` itself otherwise (no dispatch for reals)."""
    if isinstance(t, Tensor):
        return t.conj() if t._data.dtype.kind == "c" else t
    return t.conjugate() if isinstance(t, complex) else t


def fused_for_half(derivative=None, *, composite_with_grad=False):
    """``derivative`` computed in float32 for float16/bfloat16 gradients and rounded once,
    as PyTorch's fused backward kernels (tanh_backward, silu_backward, ...) do; each ember
    op of the formula would round its own result. ``composite_with_grad``: with grad mode
    on (``create_graph=True``, forward AD) PyTorch composes the formula of rounding ops
    instead (silu's and mish's infinitely differentiable backward), and so does ember."""
    if derivative is None:
        return lambda d: fused_for_half(d, composite_with_grad=composite_with_grad)

    @functools.wraps(derivative)          # (keeps the signature the registry reads)
    def wrapped(grad, *args, **kwargs):
        dtype = grad.dtype
        if dtype is not D.float16 and dtype is not D.bfloat16 or (
                composite_with_grad and _GRAD.grad_enabled):
            return derivative(grad, *args, **kwargs)

        def up(t):
            return t.float() if isinstance(t, Tensor) and t.dtype is dtype else t
        result = derivative(grad.float(), *map(up, args),
                            **{k: up(v) for k, v in kwargs.items()})
        return result.to(dtype)
    return wrapped
