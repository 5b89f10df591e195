"""Ops PyTorch has no derivative for (``Op.not_implemented``): a recorded call computes its
result untracked, then hangs PyTorch's node NotImplemented on each differentiable output, with
an edge to each input requiring grad (only those, as PyTorch's); its backward raises
"derivative for aten::<kernel> is not implemented". Forward-mode AD refuses such a call with
PyTorch's "Trying to use forward AD with aten::<kernel> that does not support it." (the
untracked call runs the op's ``refuse_forward_ad`` check). ``hang_not_implemented`` is the one
recorder of that node: for these ops' calls, in place (kernel ``<kernel>_``) or not, and for
the ``out=`` writes that PyTorch records so (ops/_out.py, ops/view_copies.py)."""

from ember._tensor import Tensor
from ember.autograd.grad_mode import no_grad

__all__ = ["record_not_implemented", "raise_not_implemented", "hang_not_implemented"]


def raise_not_implemented(kernel):
    """A derivative that raises PyTorch's error for ``kernel``, which has none."""
    def derivative(grad, *args, **kwargs):
        raise RuntimeError(f"derivative for aten::{kernel} is not implemented")
    return derivative


def hang_not_implemented(dst, kernel, tensors, view=None):
    """Make PyTorch's node NotImplemented for ``kernel`` (its backward raises) the history of
    ``dst``, just written, with an edge to each of ``tensors`` (in the kernel's order) that
    requires grad. ``view``: ``(stand-in, base_edge, recipe)`` where ``dst`` is a view: the
    node, over the stand-in for the view's former history (None: none, as PyTorch's out=
    kernels) and those tensors, goes on the view's base through a CopySlices (NOTE [In-place
    on views]); a non-differentiable ``dst`` (ldl_factor's pivots) stays untracked."""
    from ember.ops.random_nodes import NOT_IMPLEMENTED, _sampled
    if dst._data.dtype.kind not in "fcV":
        return
    edges = [t for t in tensors if isinstance(t, Tensor) and t.requires_grad]
    if view is None:
        node = _sampled(edges, dst._data, NOT_IMPLEMENTED, kernel)
        dst._grad_fn, dst._output_nr = node._grad_fn, 0
        return
    from ember.ops._inplace import CopySlices
    old, base_edge, recipe = view
    edges = ([old] if old is not None else []) + edges
    node = _sampled(edges, dst._data, NOT_IMPLEMENTED, kernel)._grad_fn
    base = dst._view[0]
    base._grad_fn = CopySlices(base_edge, node, recipe,
                               None if base.is_contiguous() else base.dim_order())
    base._output_nr = 0


def record_not_implemented(op, flat, params):
    """``op``'s result for ``flat`` and ``params``, its differentiable outputs each given
    PyTorch's node NotImplemented over the inputs that require grad."""
    from ember.ops._dispatch import RAW_OUTPUTS, call
    with no_grad():
        res = call(op, flat, params, RAW_OUTPUTS)
    tensors = op.flatten_inputs(flat)[0]
    for o in res if type(res) is tuple else (res,):
        hang_not_implemented(o, op.not_implemented_kernel, tensors)
    if type(res) is not tuple or op.namedtuple is None:
        return res
    return op.namedtuple(*res)
