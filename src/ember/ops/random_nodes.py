"""The backward nodes of PyTorch's samplers: ``normal(mean, std)``, ``bernoulli(p)`` and
``poisson(rates)`` with parameters that require grad record a node (NormalBackward3,
BernoulliBackward0, PoissonBackward0, ...) whose gradients are zero, and ``binomial``,
``bernoulli(p, 0.5)`` and ``_sample_dirichlet`` one named NotImplemented that refuses
backward. ember draws the samples on the host (ember/_random.py) and passes them through
``_sampled`` here, which records that node over the distribution's tensor parameters."""

from ember._creation import _write_out
from ember._tensor import Tensor
from ember.autograd.grad_mode import STATE as _GRAD
from ember.ops._registry import op
from ember.ops.join import _zeros_like_meta

NOT_IMPLEMENTED = "NotImplemented"


@op("_sampled(tensors, sample, node, kernel)", inputs=("tensors*",), method=False, out=False,
    scalars=False, saves_inputs=False)
def _sampled(xp, tensors, sample, node, kernel):
    """``sample``, a backend array drawn from a distribution with parameters ``tensors``,
    as the output of PyTorch's sampler ``kernel``, whose backward node is named ``node``."""
    return sample


@_sampled.named_by
def _(flat, params, outputs):
    return params[1]


@_sampled.derivative
def _(grad, tensors, sample, node, kernel):
    if node == NOT_IMPLEMENTED:
        # (PyTorch's in-place foreach kernels name themselves without their namespace)
        bare = kernel.startswith("_foreach_") and kernel.endswith("_") or kernel == "set_"
        raise RuntimeError(f"derivative for {'' if bare else 'aten::'}{kernel} is not "
                           f"implemented")
    return ([_zeros_like_meta(grad, t) for t in tensors],)


def sampled(params, sample, node, kernel, out=None):
    """The drawn tensor ``sample`` (written to ``out`` if given), recording ``node`` when a
    tensor among the distribution's ``params`` requires grad; ``sample`` itself otherwise."""
    tensors = [t for t in params if isinstance(t, Tensor)]
    if not (_GRAD.grad_enabled and any(t.requires_grad for t in tensors)):
        return sample if out is None else _write_out(out, sample._data)
    check_out_grad(tensors, kernel, out)
    if sample.dtype.is_complex:
        raise RuntimeError(f"{kernel} does not support automatic differentiation for outputs "
                           f"with complex dtype.")
    return _sampled(tensors, sample._data, node, kernel)


def check_out_grad(params, kernel, out):
    """PyTorch's error for an ``out=`` sample of ``kernel`` whose tensor ``params`` require
    grad (its first check, before those of the dtypes)."""
    if out is not None and _GRAD.grad_enabled and any(
            isinstance(t, Tensor) and t.requires_grad for t in params):
        raise RuntimeError(f"{kernel}(): functions with out=... arguments don't support "
                           f"automatic differentiation, but one of the arguments requires grad.")
