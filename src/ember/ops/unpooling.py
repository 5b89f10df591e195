"""Max unpooling: the values of a max pool written back at their indices, zeros elsewhere."""

import numpy as np

from ember._memory_format import like_input
from ember.ops._pool_args import reject_dtype, tuple_arg
from ember.ops._pool_index import _plane_gather, plane_offsets
from ember.ops._registry import op

__all__ = []


def _unpool_size(nd, x, indices, kernel_size, stride, padding, output_size):
    name = f"max_unpool{nd}d"
    k = tuple_arg(name, "kernel_size", kernel_size, nd)
    s = tuple_arg(name, "stride", stride, nd, optional=True) or k
    p = tuple_arg(name, "padding", padding, nd)
    default = tuple((x.shape[x.ndim - nd + i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(nd))
    if output_size is None:
        return default
    if len(output_size) == nd + 2:
        output_size = output_size[2:]
    size = tuple(int(v) for v in output_size)
    if len(size) != nd:
        raise ValueError(f"output_size should be a sequence containing {nd} or {nd + 2} "
                         f"elements, but it has a length of '{len(size)}'")
    for d in range(nd):
        lo, hi = default[d] - s[d], default[d] + s[d]
        if not lo < size[d] < hi:
            raise ValueError(f"invalid output_size \"{output_size}\" (dim {d} must be "
                             f"between {lo} and {hi})")
    return size


def _max_unpool(xp, x, indices, nd, kernel_size, stride, padding, output_size):
    low = max(nd, 2)
    if x.ndim not in (nd + 1, nd + 2):
        got = x.ndim + (1 if nd == 1 else 0)
        raise RuntimeError(f"Input to max_unpooling{low}d should be a {low + 1}d or {low + 2}d "
                           f"Tensor, but got a tensor with {got} dimensions.")
    if indices.dtype != np.int64:
        from ember import _dtype as D
        got = "" if nd == 3 else f" but got: {D.FROM_NUMPY[indices.dtype]._torch_name}"
        raise RuntimeError(f"elements in indices should be type int64{got}")
    if indices.shape != x.shape:
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(x.shape)}) but got indices tensor with shape: "
                           f"{list(indices.shape)}")
    size = _unpool_size(nd, x, indices, kernel_size, stride, padding, output_size)
    if x.size:
        reject_dtype(f"max_unpool{max(nd, 2)}d", x.dtype, "fV")
    plane = int(np.prod(size, dtype=np.int64))
    if indices.size and (indices.min() < 0 or indices.max() >= plane):
        bad = indices[(indices < 0) | (indices >= plane)].reshape(-1)[0]
        shown = "x".join(str(v) for v in (size + (1,) if nd == 1 else size))
        raise RuntimeError(f"Found an invalid max index: {int(bad)} (output volumes are of size "
                           f"{shown})")
    lead = x.shape[:x.ndim - nd]
    out = xp.zeros(lead + size, dtype=x.dtype)
    per_slice = int(np.prod(indices.shape[x.ndim - nd:], dtype=np.int64))
    flat = indices.reshape(lead + (per_slice,)) + plane_offsets(xp, lead, plane)
    out.reshape(-1)[flat.reshape(-1)] = x.reshape(-1)
    return out


def _functional(nd, registered):
    def max_unpool(input, indices, kernel_size, stride=None, padding=0, output_size=None):
        _unpool_size(nd, input, indices, kernel_size, stride, padding, output_size)
        return registered.function(input, indices, kernel_size, stride, padding, output_size)
    max_unpool.__name__ = max_unpool.__qualname__ = f"max_unpool{nd}d"
    max_unpool.__module__ = "ember.nn.functional"
    max_unpool.__doc__ = registered.function.__doc__
    return max_unpool


def _unpool_op(nd):
    def forward(xp, x, indices, kernel_size, stride, padding, output_size):
        out = _max_unpool(xp, x, indices, nd, kernel_size, stride, padding, output_size)
        # (PyTorch's 2-D kernel keeps a channels-last input's layout, its 3-D one does not)
        return like_input(xp, x, out) if nd == 2 else out
    forward.__doc__ = f"{nd}-D max unpooling: ``input`` placed at ``indices``, zeros elsewhere."
    registered = op(f"max_unpool{nd}d(input, indices, kernel_size, stride=None, padding=0, "
                    f"output_size=None)", inputs=2, method=False,
                    namespace="nn.functional", grad_fn_name=f"MaxUnpool{nd}DBackward0")(forward)
    registered.nondifferentiable("indices")
    if nd == 1:                             # PyTorch unpools 1-D inputs as 2-D
        registered.name_nodes("SqueezeBackward1")
    registered.reads_inputs((), (0,))       # PyTorch saves the indices alone

    @registered.derivative
    def _(grad, x, indices, *params):
        return _plane_gather(grad, indices, nd), None
    return registered


# the public functions check output_size first: PyTorch raises ValueError there, and the
# dispatcher turns errors escaping a forward into RuntimeError
FUNCTIONAL = {f"max_unpool{nd}d": _functional(nd, _unpool_op(nd)) for nd in (1, 2, 3)}
