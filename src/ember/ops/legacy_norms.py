"""frobenius_norm and nuclear_norm: PyTorch's deprecated norms, kept for old scripts; they
warn as PyTorch does and compute ``linalg.vector_norm(A, 2, dim)`` and
``linalg.matrix_norm(A, "nuc", dim)``."""

import warnings

from ember._tensor import Tensor
from ember._warn import user_level
from ember.autograd.grad_mode import STATE as _GRAD
from ember.ops.view_copies import _finish

__all__ = ["frobenius_norm", "nuclear_norm"]

_DEPRECATED = ("at::{name} is deprecated and it is just left for JIT compatibility. It will "
               "be removed in a future PyTorch release. Please use `{instead}` instead")


def _dims(dim, count=None):
    """``dim`` (an int or a sequence of ints) as a tuple; an int fills ``count`` places."""
    if isinstance(dim, int) and not isinstance(dim, bool):
        return (dim,) * (count or 1)
    return tuple(dim)


def frobenius_norm(input, dim, keepdim=False, *, out=None):
    """The Frobenius (2-)norm of ``input`` over ``dim`` (at most two dims); deprecated, use
    ``linalg.vector_norm(input, 2, dim, keepdim)``."""
    from ember import linalg
    warnings.warn(_DEPRECATED.format(name="frobenius_norm",
                                     instead="linalg.vector_norm(A, 2., dim, keepdim)"),
                  UserWarning, stacklevel=user_level(2))
    dim = _dims(dim)
    if len(dim) > 2:
        raise RuntimeError(f"Expected at most 2 dimensions, but got {len(dim)} dimensions "
                           f"instead.")
    if isinstance(input, Tensor) and not (input.is_floating_point() or input.is_complex()):
        raise RuntimeError(f"norm(): input dtype should be either floating point or complex. "
                           f"Got {input.dtype._torch_name} instead.")
    if out is not None and _GRAD.grad_enabled and any(
            isinstance(t, Tensor) and t.requires_grad for t in (input, out)):
        raise RuntimeError("norm(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    result = linalg.vector_norm(input, 2, dim, keepdim)
    return result if out is None else _finish("frobenius_norm", result, out)


def nuclear_norm(input, dim=None, keepdim=False, *, out=None):
    """The nuclear norm (sum of singular values) of the matrices over ``dim`` (default the
    last two); deprecated, use ``linalg.matrix_norm(input, "nuc", dim, keepdim)``."""
    from ember import linalg
    warnings.warn(_DEPRECATED.format(name="nuclear_norm",
                                     instead="linalg.matrix_norm(A, 'nuc', dim, keepdim)"),
                  UserWarning, stacklevel=user_level(2))
    if isinstance(dim, bool):               # nuclear_norm(input, keepdim)
        dim, keepdim = None, dim
    dim = (-2, -1) if dim is None else _dims(dim, 2)
    return linalg.matrix_norm(input, "nuc", dim, keepdim, out=out)


PUBLIC = {"frobenius_norm": frobenius_norm, "nuclear_norm": nuclear_norm}
for _fn in PUBLIC.values():
    _fn.__module__ = "ember"
