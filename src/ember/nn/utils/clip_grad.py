"""Gradient clipping: by total norm (clip_grad_norm_) and by value (clip_grad_value_)."""

import types
import warnings

from ember._tensor import Tensor, _make
from ember.autograd.grad_mode import no_grad
from ember.backend import device_guard, device_kernel, gpu_elsewhere

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm",
           "clip_grads_with_norm_"]


def _tensor_list(tensors):
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


@no_grad()
def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type``-norm of all ``tensors`` together (as if concatenated)."""
    from ember import linalg, stack, tensor
    tensors = _tensor_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    first = tensors[0].device               # norms on several GPUs combine on the first
    for i, t in enumerate(tensors):         # (PyTorch's grouping by device refuses a None)
        if t is None:
            raise RuntimeError(f"Tensors of the first list of nested Tensor lists are supposed "
                               f"to be defined but the {i}-th Tensor is not.")
    fast = device_kernel(tensors[0]._data, "grad_norm") if norm_type == 2.0 else None
    if fast is not None:
        with device_guard(gpu_elsewhere(tensors[0]._data)):
            total = fast([t._data for t in tensors])
        if total is not None:               # all in one launch on a GPU
            return _check_finite(_make(total), norm_type, error_if_nonfinite)
    norms = [linalg.vector_norm(t, norm_type).to(first) for t in tensors]
    dtypes = {n.dtype for n in norms}
    if len(dtypes) > 1:                      # mixed precisions: combine in the widest
        from ember import promote_types
        wide = norms[0].dtype
        for d in dtypes:
            wide = promote_types(wide, d)
        norms = [n.to(wide) for n in norms]
    return _check_finite(linalg.vector_norm(stack(norms), norm_type), norm_type,
                         error_if_nonfinite)


def _check_finite(total, norm_type, error_if_nonfinite):
    if error_if_nonfinite and bool(total.isnan() | total.isinf()):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            f"non-finite, so it cannot be clipped. To disable this error and scale the "
            f"gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


@no_grad()
def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients of ``parameters`` by ``min(1, max_norm / (total_norm + 1e-6))``."""
    grads = [p.grad for p in _tensor_list(parameters) if p.grad is not None]
    if not grads:
        return
    from ember import clamp                 # (a non-tensor total_norm raises TypeError)
    coef = clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
    fast = device_kernel(grads[0]._data, "scale_all")
    if fast is not None and coef.device == grads[0].device:
        with device_guard(gpu_elsewhere(coef._data)):
            done = fast([g._data for g in grads], coef._data)
        if done:
            for g in grads:                 # all scaled in one launch on a GPU
                g._bump_version()
            return
    for g in grads:                         # the 0-dim coefficient keeps its precision
        g.mul_(coef.to(g.device))


@no_grad()
def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Rescale the gradients of ``parameters`` so their total norm is at most ``max_norm``;
    returns the total norm before clipping."""
    is_generator = isinstance(parameters, types.GeneratorType)
    parameters = _tensor_list(parameters)
    if is_generator and not parameters:
        warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.",
                      stacklevel=3)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                   foreach=None):
    """Deprecated alias of :func:`clip_grad_norm_`."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


@no_grad()
def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp the gradients of ``parameters`` to [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    grads = [p.grad for p in _tensor_list(parameters) if p.grad is not None]
    if not grads:   # PyTorch's grouping of the gradients by device rejects an empty list
        raise RuntimeError(
            "Expected !nested_tensorlist[0].empty() to be true, but got false.  (Could this "
            "error message be improved?  If so, please report an enhancement request to "
            "PyTorch.)")
    for g in grads:
        g.clamp_(min=-clip_value, max=clip_value)
