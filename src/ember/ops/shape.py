"""Shape ops that return views: view, reshape, expand, squeeze, unsqueeze, permute, ..."""

import math

from ember._tensor import Tensor
from ember.ops._dims import wrap_dim
from ember.ops._registry import op


def infer_shape(shape, numel):
    """Resolve one ``-1`` in ``shape`` and check the element count."""
    shape = [int(s) for s in shape]
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise RuntimeError("only one dimension can be inferred")
    for s in shape:
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s}")
    known = math.prod(s for s in shape if s != -1)
    if unknown:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[unknown[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def _shape_param(shape):
    if isinstance(shape, int):
        return (shape,)
    return tuple(shape)


@op("view(input, shape)", view=True, saves_inputs=False, method_varargs="shape")
def view(xp, x, shape):
    """The same data with another shape; never copies (fails where strides don't allow)."""
    if isinstance(shape, tuple) and len(shape) == 1 and not isinstance(shape[0], int) \
            and hasattr(shape[0], "np"):
        raise TypeError("view(dtype) is not supported")
    new = infer_shape(_shape_param(shape), x.size)
    out = x.view()
    try:
        out.shape = new                 # NumPy refuses instead of copying
    except AttributeError:
        raise RuntimeError("view size is not compatible with input tensor's size and stride "
                           "(at least one dimension spans across two contiguous subspaces). "
                           "Use .reshape(...) instead.") from None
    return out


@view.derivative
def _(grad, x, shape):
    return grad.reshape(x.shape)


@op("reshape(input, shape)", view="maybe", saves_inputs=False, method_varargs="shape")
def reshape(xp, x, shape):
    """The same data with another shape: a view when possible, else a copy."""
    return xp.reshape(x, infer_shape(_shape_param(shape), x.size))


@reshape.derivative
def _(grad, x, shape):
    return grad.reshape(x.shape)


@op("expand(input, size)", view=True, saves_inputs=False, method_varargs="size",
    method=True)
def expand(xp, x, size):
    """A broadcast view with ``size`` (-1 keeps a dim); adds no memory."""
    size = _shape_param(size)
    if len(size) < x.ndim:
        raise RuntimeError(f"expand(torch.FloatTensor{{{list(x.shape)}}}, size={list(size)}): "
                           f"the number of sizes provided ({len(size)}) must be greater or "
                           f"equal to the number of dimensions in the tensor ({x.ndim})")
    lead = len(size) - x.ndim
    target = []
    for i, s in enumerate(size):
        if i < lead:
            if s < 0:
                raise RuntimeError(f"The expanded size of the tensor ({s}) isn't allowed in a "
                                   f"leading, non-existing dimension {i}")
            target.append(s)
            continue
        have = x.shape[i - lead]
        if s == -1:
            s = have
        elif have != s and have != 1:
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing "
                               f"size ({have}) at non-singleton dimension {i}.  Target sizes: "
                               f"{list(size)}.  Tensor sizes: {list(x.shape)}")
        target.append(s)
    return xp.broadcast_to(x, tuple(target))


@expand.derivative
def _(grad, x, size):
    from ember.autograd.graph import sum_to
    return sum_to(grad, x.shape)


@op("unsqueeze(input, dim)", view=True, saves_inputs=False)
def unsqueeze(xp, x, dim):
    """A view with a size-1 dim inserted at ``dim``."""
    return xp.expand_dims(x, wrap_dim(dim, x.ndim + 1))


@unsqueeze.derivative
def _(grad, x, dim):
    return grad.reshape(x.shape)


@op("squeeze(input, dim=None)", view=True, saves_inputs=False)
def squeeze(xp, x, dim):
    """A view without size-1 dims (only those in ``dim`` when given)."""
    if dim is None:
        return xp.squeeze(x)
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    dims = tuple(d for d in (wrap_dim(d, x.ndim) for d in dims)
                 if x.ndim and x.shape[d] == 1)
    return xp.squeeze(x, axis=dims) if dims else x.view()


@squeeze.derivative
def _(grad, x, dim):
    return grad.reshape(x.shape)


@op("permute(input, dims)", view=True, saves_inputs=False, method_varargs="dims")
def permute(xp, x, dims):
    """A view with dims reordered."""
    dims = _shape_param(dims)
    if len(dims) != x.ndim:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {x.ndim} is not equal to len(dims) = {len(dims)}"
                           .replace("(sparse_coo)", ""))
    wrapped = [wrap_dim(d, x.ndim) for d in dims]
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return xp.transpose(x, wrapped)


@permute.derivative
def _(grad, x, dims):
    wrapped = [wrap_dim(d, x.ndim) for d in _shape_param(dims)]
    inverse = [0] * len(wrapped)
    for i, d in enumerate(wrapped):
        inverse[d] = i
    return grad.permute(inverse)


@op("transpose(input, dim0, dim1)", view=True, saves_inputs=False)
def transpose(xp, x, dim0, dim1):
    """A view with ``dim0`` and ``dim1`` swapped."""
    if x.ndim == 0:
        wrap_dim(dim0, 0), wrap_dim(dim1, 0)
        return x.view()
    return xp.swapaxes(x, wrap_dim(dim0, x.ndim), wrap_dim(dim1, x.ndim))


@transpose.derivative
def _(grad, x, dim0, dim1):
    return grad.transpose(dim0, dim1)


@op("t(input)", view=True, saves_inputs=False)
def t(xp, x):
    """The transpose of a tensor of at most 2 dims."""
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return x.T


@t.derivative
def _(grad, x):
    return grad.t()


Tensor.T = property(lambda self: self.permute(*reversed(range(self.ndim))),
                    doc="All dims reversed.")
Tensor.mT = property(lambda self: self.transpose(-2, -1), doc="The last two dims swapped.")
Tensor.H = property(lambda self: self.T.conj(), doc="The conjugate transpose.")
Tensor.mH = property(lambda self: self.mT.conj(), doc="The conjugate of mT.")
