"""Faster CUDA forwards for registered ops (Triton or CuPy raw kernels), loaded with the
CUDA backend. NOTE [CUDA kernel overrides]: a kernel module here defines a forward with
the op's own forward signature, ``(xp, *arrays, *params)``, and registers it::

    @override("softmax")
    def softmax(xp, x, dim, dtype):
        ...                     # cupy arrays in, a cupy array out; None to fall back

The op keeps its definition, promotion and derivative in ``ops/``; only its forward on CuPy
arrays changes. CPU calls never reach an override (a CPU-only process never loads this
package), and a kernel returning None hands the call to the generic forward (a dtype or
layout it does not cover). ``@override_derivative("op")`` does the same for the op's
derivative (same arguments, Tensors in and out) in backwards that record no graph. Kernels
that are neither (the LSTM time step inside a layer's loop, the optimizers' fused updates,
random numbers) go into ``ember.backend.DEVICE_KERNELS`` by name.

The kernels are written in Triton (``triton_*.py``) and load with the CUDA backend when
Triton is installed; ``EMBER_CUDA_KERNELS=0`` leaves every op on its generic CuPy forward.
"""

import os
import warnings

import numpy as np

from ember.autograd.grad_mode import STATE as _GRAD
from ember.ops._registry import REGISTRY

__all__ = ["override", "override_derivative", "OVERRIDES", "DERIVATIVES", "DISABLED",
           "fallible", "KernelUnavailable", "load"]

OVERRIDES = {}                  # op name -> the CUDA forward registered for it
DERIVATIVES = {}                # op name -> the CUDA derivative registered for it
DISABLED = {}                   # kernel name -> why it could not run here (then never again)


class KernelUnavailable(RuntimeError):
    """A kernel that could not be compiled or launched on this machine (an old Triton, an
    unsupported GPU): its op falls back to the generic forward."""


def _disable(name, error):
    DISABLED[name] = str(error)
    warnings.warn(f"ember's CUDA kernel for {name} is off ({error}); the generic CuPy code "
                  f"runs instead", RuntimeWarning, stacklevel=3)


def override(name):
    """Register the decorated function as op ``name``'s forward on CUDA arrays."""
    def register(fast):
        op = REGISTRY[name]
        generic = op.forward

        def forward(xp, *args, keep=None):
            if xp is not np and name not in DISABLED:
                try:
                    out = fast(xp, *args)
                except KernelUnavailable as e:
                    _disable(name, e)
                    out = None
                if out is not None:     # (keeping nothing: NOTE [Kept values])
                    return out
            return generic(xp, *args) if keep is None else generic(xp, *args, keep=keep)
        forward.__doc__ = generic.__doc__
        op.forward = forward
        OVERRIDES[name] = fast
        return fast
    return register


def override_derivative(name):
    """Register the decorated function as op ``name``'s derivative on CUDA arrays, for
    backwards that record no graph (double backward keeps the op's own)."""
    def register(fast):
        op = REGISTRY[name]
        generic = op.vjp

        def vjp(grad, *args, **kwargs):
            first = grad[0] if type(grad) is tuple else grad    # on the op's device
            if (not _GRAD.grad_enabled and name not in DISABLED
                    and type(first._data) is not np.ndarray):
                try:
                    result = fast(grad, *args, **kwargs)
                except KernelUnavailable as e:
                    _disable(name, e)
                    result = None
                if result is not None:
                    return result
            return generic(grad, *args, **kwargs)
        op.vjp = vjp                    # op.derivative would re-read the signature: keep it
        DERIVATIVES[name] = fast
        return fast
    return register


def fallible(name, kernel):
    """``kernel`` (a ``DEVICE_KERNELS`` entry) returning None, and removed, once it turns
    out unable to run here."""
    from ember.backend import DEVICE_KERNELS

    def run(*args, **kwargs):
        try:
            return kernel(*args, **kwargs)
        except KernelUnavailable as e:
            DEVICE_KERNELS.pop(name, None)
            _disable(name, e)
            return None
    run.__doc__ = kernel.__doc__
    return run


def load(cupy):
    """Register the Triton kernels as CUDA forwards; a no-op without Triton (or when
    ``EMBER_CUDA_KERNELS=0``), which leaves the generic CuPy forwards in place."""
    if OVERRIDES or os.environ.get("EMBER_CUDA_KERNELS", "1") == "0":
        return
    try:
        import triton  # noqa: F401
    except ImportError:
        return
    try:
        from ember.backend.cuda_kernels import _launch
        _launch.follow_cupy(cupy)
    except Exception as e:          # Triton without a usable driver: the generic forwards
        warnings.warn(f"ember's Triton kernels are off: Triton cannot launch here "
                      f"({type(e).__name__}: {e})", RuntimeWarning, stacklevel=2)
        return
    from ember.backend.cuda_kernels import (forwards, gradients, named,  # noqa: F401
                                            recurrent, spatial)
