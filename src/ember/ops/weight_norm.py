"""Weight normalization, ``w = g * v / ||v||`` with the norm over every dim of ``v`` but
``dim``: ``torch._weight_norm``, which both ``nn.utils.weight_norm`` forms call.

As PyTorch's, it takes the fused kernel (``_weight_norm_interface``, whose node is
``WeightNormInterfaceBackward0``) for ``dim`` 0 or the last dim, and otherwise the composition
``v * (g / norm_except_dim(v, 2, dim))`` (nodes ``MulBackward0`` and ``DivBackward0``). The
fused form reads ``g`` as one value per index of ``dim`` whatever its shape, wants ``v`` and
``g`` of one floating dtype, and computes 16-bit inputs in float32, rounding once."""

import numpy as np

from ember import _dtype as D
from ember.ops._dims import wrap_dim
from ember.ops._registry import op

__all__ = ["_weight_norm"]

_F32 = np.dtype(np.float32)


def _others(ndim, dim):
    return tuple(d for d in range(ndim) if d != dim)


def _norm_shape(v_shape, dim):
    """The shape of the norms: ``v``'s, with size 1 along every dim but ``dim``."""
    return tuple(n if d == dim else 1 for d, n in enumerate(v_shape))


@op("_weight_norm_interface(v, g, dim=0)", inputs=2, method=False, out=False)
def _weight_norm_interface(xp, v, g, dim):
    """``g * v / ||v||``, the norm over every dim but ``dim`` (0 or the last one)."""
    if v.dtype.kind not in "fV" or v.itemsize < 2:      # (float8 is refused too)
        name = D.FROM_NUMPY[v.dtype]._torch_name
        raise NotImplementedError(f"\"weight_norm_kernel\" not implemented for '{name}'")
    if g.dtype != v.dtype:
        raise RuntimeError(f"expected scalar type {D.FROM_NUMPY[v.dtype]._torch_name} but found "
                           f"{D.FROM_NUMPY[g.dtype]._torch_name}")
    if g.size != v.shape[dim]:
        raise RuntimeError(f"weight_norm: expected g to have {v.shape[dim]} elements (the size "
                           f"of v along dim {dim}), but got {g.size}")
    vf = v.astype(_F32) if v.itemsize < 4 else v     # 16-bit: float32, rounded once
    gf = g.astype(vf.dtype, copy=False).reshape(_norm_shape(v.shape, dim))
    norm = xp.sqrt(xp.sum(vf * vf, axis=_others(v.ndim, dim), keepdims=True))
    return (vf * (gf / norm)).astype(v.dtype, copy=False)


_weight_norm_interface.refuse_forward_ad("_weight_norm_interface")


@_weight_norm_interface.derivative
def _(grad, v, g, dim):
    if v.dtype in D.LOW_PRECISION:      # in float32, each gradient rounded once
        gv, gg = _(grad.float(), v.float(), g.float(), dim)
        return gv.to(v.dtype), gg.to(g.dtype)
    from ember.ops.segment_reduce import norm_except_dim
    others = _others(v.dim(), dim)
    norm = norm_except_dim(v, 2, dim).reshape(_norm_shape(v.shape, dim))
    dot = (grad * v).sum(others, keepdim=True) if others else grad * v
    grad_g = (dot / norm).reshape(g.shape)
    grad_v = (g.reshape(norm.shape) / norm) * (grad - v * (dot / (norm * norm)))
    return grad_v, grad_g


def _weight_norm(v, g, dim=0):
    """``g * v / ||v||``, the 2-norm taken over every dim of ``v`` but ``dim`` (all of them
    for ``dim=-1``): the weight of a weight-normalized module."""
    from ember.ops.segment_reduce import norm_except_dim
    if v.device != g.device:
        raise RuntimeError(f"weight_norm: expected v_in and g_in to be on the same device, but "
                           f"v_in is on {v.device} and g_in is on {g.device}")
    if v.dim() == 0 and dim in (-1, 0):
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    wrap_dim(dim, v.dim())
    if dim == 0 or dim == v.dim() - 1:
        return _weight_norm_interface(v.contiguous(), g.contiguous(), dim)
    return v * (g / norm_except_dim(v, 2, dim))


PUBLIC = {"_weight_norm": _weight_norm}
_weight_norm.__module__ = "ember"
