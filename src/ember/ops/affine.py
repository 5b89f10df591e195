"""Affine maps of the nn layers: linear (``x @ W^T + b``, one GEMM) and bilinear
(``x1^T A x2 + b``).

linear flattens the leading dims of ``input`` so that the forward and both matrix gradients
are single 2-D GEMMs; 16-bit floats accumulate in float32 (natively on a GPU, on float32
copies on the CPU: ``backend.low_precision_product``). A recorded call records PyTorch's
graph (an addmm of ``(bias, input, weight.t())`` between views) on that one product.
"""

import math

import numpy as np

from ember import _dtype as D
from ember._tensor import _make
from ember.amp._state import suspended
from ember.autograd.graph import _sequence
from ember.backend import XP_BY_ARRAY_TYPE, loud_fp, low_precision_product, quiet_fp
from ember.backend.blas_threads import follow_load
from ember.ops._elementwise import conj_grad
from ember.ops._recording import _mark_view, _record, fast_reshape, gradient_t, rename_node
from ember.ops._reduce import grad_enabled
from ember.ops._registry import broadcast_message, op
from ember.ops.linalg import matmul
from ember.ops.shape import _unsafe_view, squeeze as _squeeze, t as _t
from ember.ops.shape import unsqueeze as _unsqueeze, view as _view

_LOW = D.LOW_PRECISION_NP
_MM_NAMES = {"float64": "double", "float32": "float", "float16": "c10::Half",
             "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int",
             "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}


def _mm_name(a):
    return _MM_NAMES.get(a.dtype.name, a.dtype.name)


def _shape_text(shape):
    return "x".join(str(s) for s in shape)


def _check_linear(x, w, b=None):
    if x.ndim == 0 or w.ndim == 0:
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are "
                           f"{x.ndim}D and {w.ndim}D")
    if w.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {w.ndim}D")
    if b is not None and (x.ndim == 2 or _fused_bias(x, b)):   # addmm: its messages
        if w.ndim == 1:
            raise RuntimeError("mat2 must be a matrix, got 1-D tensor")
        for arg, t in (("self", b), ("mat1", x)):
            if t.dtype != w.dtype:
                raise RuntimeError(f"{arg} and mat2 must have the same dtype, but got "
                                   f"{D.FROM_NUMPY[t.dtype]._torch_name} and "
                                   f"{D.FROM_NUMPY[w.dtype]._torch_name}")
    if x.dtype != w.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{_mm_name(x)} != {_mm_name(w)}")
    if x.shape[-1] != w.shape[-1]:
        rows = x.size // x.shape[-1] if x.shape[-1] else int(np.prod(x.shape[:-1]))
        m1 = (rows, x.shape[-1]) if x.ndim > 1 else (1, x.shape[0])
        m2 = w.shape[::-1] if w.ndim == 2 else (w.shape[0], 1)
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_shape_text(m1)} and "
                           f"{_shape_text(m2)})")
    if x.dtype == np.bool_:
        raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")


@op("linear(input, weight, bias=None)", inputs=3, namespace="nn.functional", out=True)
def linear(xp, x, w, b):
    """Apply ``y = x A^T + b`` to the last dim of ``input``."""
    _check_linear(x, w, b)
    dtype = x.dtype
    shape = x.shape[:-1] + w.shape[:-1]
    rows = x.reshape(_rows(x.shape), x.shape[-1]) if x.ndim > 2 else x
    follow_load(xp)
    if dtype in _LOW:       # the CPU's float32 sums take the bias before rounding
        out = low_precision_product(xp, rows, w.T, float32_sums=True)
    else:
        out = rows @ w.T
    if b is not None and _fused_bias(x, b):     # addmm's: the bias spans the rows' product
        if x.ndim != 2:
            out = out.reshape(_rows(x.shape), w.shape[0])
        _check_bias(b, dtype, out.shape, True)
        out += b
    elif b is not None:                 # added in place to matmul's result
        _check_bias(b, dtype, shape, False)
        if out.ndim:
            out = out.reshape(shape)
            out += b
        else:
            out = out + b
    if out.shape != shape:
        out = out.reshape(shape)
    return out.astype(dtype) if out.dtype != dtype else out


def _rows(shape):
    """The number of rows a linear's input of ``shape`` folds into (1 for a vector)."""
    return math.prod(shape[:-1])


def _fused_bias(x, b):
    """Whether PyTorch adds bias ``b`` by an addmm on the rows of input ``x`` (an array):
    for a matrix, or a dense input with a bias of one dim not 1 (or a vector); else it adds
    it to matmul's result in place."""
    return x.ndim == 2 or x.flags.c_contiguous and (
        b.ndim == 1 or sum(s != 1 for s in b.shape) == 1)


def _check_bias(b, dtype, shape, fused):
    """Raise PyTorch's error for a bias that addmm cannot expand to ``shape`` (``fused``), or
    that an in-place add to a result of ``shape`` cannot take."""
    if b.dtype != dtype and fused:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                           f"{D.FROM_NUMPY[b.dtype]._torch_name} and "
                           f"{D.FROM_NUMPY[dtype]._torch_name}")
    if b.dtype != dtype:        # an in-place add: a bias of another dtype of the same kind
        want = D.FROM_NUMPY[dtype]
        promoted = D.promote_types(want, D.FROM_NUMPY[b.dtype])
        if not D.can_cast(promoted, want):
            raise RuntimeError(f"result type {promoted._torch_name} can't be cast to the "
                               f"desired output type {want._torch_name}")
    if fused and b.ndim > 2:
        raise RuntimeError(f"expand(ember.{D.FROM_NUMPY[b.dtype]._legacy}{{{list(b.shape)}}}, "
                           f"size={list(shape)}): the number of sizes provided (2) must be "
                           f"greater or equal to the number of dimensions in the tensor "
                           f"({b.ndim})")
    if fused and any(s != 1 and s != t for s, t in zip(b.shape[::-1], shape[::-1])):
        raise RuntimeError(_expand_message(b.shape, shape))
    if not fused:
        try:
            full = np.broadcast_shapes(shape, b.shape)
        except ValueError:
            raise RuntimeError(broadcast_message([shape, b.shape])) from None
        if full != tuple(shape):
            raise RuntimeError(f"output with shape {list(shape)} doesn't match the broadcast "
                               f"shape {list(full)}")


@linear.named_by
def _(flat, params, out):
    """The name of linear's own node, recorded only on the meta device (other calls record
    PyTorch's graph below): that of the last node PyTorch's graph has."""
    x, b = flat[0], flat[2]
    if x.ndim == 2:
        return "AddmmBackward0" if b is not None else "MmBackward0"
    if b is not None:
        return "ViewBackward0" if _fused_bias(x._data, b._data) else "AddBackward0"
    return "SqueezeBackward4" if x.ndim == 1 else "UnsafeViewBackward0"


@linear.composed_when_recording
def _(inputs, params):
    """PyTorch's graph of a recorded linear: of a matrix, or of a dense batch (or vector)
    with no bias or one added by addmm (``_fused_bias``), that of ``_recorded_linear``; other
    calls compose PyTorch's matmul of ``weight.t()`` (and add the bias)."""
    x, w, b = inputs
    a, wa = x._data, w._data
    ba = None if b is None else b._data
    nd = a.ndim
    if not nd or not 0 < wa.ndim <= 2:
        return NotImplemented           # (the forward raises PyTorch's error)
    if wa.ndim == 2 and (ba is None and (nd <= 2 or a.flags.c_contiguous)
                         or ba is not None and _fused_bias(a, ba)):
        return _recorded_linear(x, w, b)
    _check_linear(a, wa, ba)
    if ba is not None:
        _check_bias(ba, a.dtype, a.shape[:-1] + wa.shape[:-1], False)
    if wa.ndim == 1 or nd == 1:
        out = matmul(x, _t(w))
    else:                   # matmul's: the batch folded into rows (copied), an mm, a view
        mark = next(_sequence)
        rows = x.reshape(_rows(a.shape), a.shape[-1])
        if not (rows.requires_grad or w.requires_grad):     # (only the bias needs a grad)
            return _unsafe_view(linear(rows, w), a.shape[:-1] + wa.shape[:1]) + _like(b, x)
        product = _recorded_linear(rows, w, None)
        _made_after_t(rows.grad_fn, mark, product.grad_fn)
        shape = a.shape[:-1] + wa.shape[:1]
        out = _make(product._data.reshape(shape))
        fast_reshape(_record(_unsafe_view, (product,), None, (shape,), out))
    return out if b is None else out + _like(b, x)


def _like(b, x):
    """Bias ``b`` in the dtype of input ``x``: PyTorch adds it in place to matmul's result."""
    return b if b.dtype == x.dtype else b.to(x.dtype)


def _recorded_linear(x, w, b):
    """The graph of a matrix's linear (or a dense batch's, with no bias or one addmm adds),
    its nodes recorded here on the one product, without further dispatch: an addmm of
    ``(bias, input, weight.t())`` (an mm without bias); for a batch, of the input's rows
    (a view), its result viewed to the batch's shape (by ``_unsafe_view`` without bias, as
    PyTorch's matmul; a vector is unsqueezed and squeezed instead)."""
    a, wa = x._data, w._data
    ba = None if b is None else b._data
    nd = a.ndim
    xp = XP_BY_ARRAY_TYPE[type(a)]
    token = quiet_fp()
    try:
        res = linear.forward(xp, a, wa, ba)
    finally:
        loud_fp(token)
    fold = None
    if nd != 2:
        rows = _make(a.reshape(_rows(a.shape), a.shape[-1]))
        by, args = (_unsqueeze, (0,)) if nd == 1 and ba is None else (_view, (rows.shape,))
        _mark_view(by, x, args, rows)
        if x._requires_grad or x._grad_fn is not None:
            fold = fast_reshape(_record(by, (x,), None, args, rows))
        x = rows
    product = _make(res if nd == 2 else res.reshape(_rows(res.shape), res.shape[-1]))
    if b is None:
        node = _record(_linear_mm, (x, w), None, (), product)
        if fold is not None:        # (made after the t() node: see _made_after_t)
            fold._seq = node._seq - 0.25
    else:
        _record(_linear_addmm, (b, x, w), None, (), product)
    if nd == 2:
        return product
    out = _make(res)
    if b is None and nd == 1:       # (squeezed in place: no view)
        fast_reshape(_record(_squeeze, (product,), None, (0,), out))
        return rename_node(out, "SqueezeBackward4")
    if b is None:
        fast_reshape(_record(_unsafe_view, (product,), None, (res.shape,), out))
    else:
        _mark_view(_view, product, (res.shape,), out)
        fast_reshape(_record(_view, (product,), None, (res.shape,), out))
    return out


def _made_after_t(node, mark, product_node):
    """Number the nodes of the input's fold (``node`` and the ones under it made since
    ``mark``) as made after the lazy t() node of ``product_node`` (just before it): without
    bias PyTorch's matmul takes ``weight.t()`` made first, so the fold's branch runs first."""
    top = product_node._seq
    k = 1
    while node is not None and mark < node._seq < top:
        node._seq = top - 0.5 + 0.25 / k
        k += 1
        node = node.next_functions[0][0] if node.next_functions else None


def _expand_message(have, target):
    if len(have) > len(target):
        return (f"The expanded size of the tensor ({len(target)}) must be greater or equal to "
                f"the number of dimensions in the tensor ({len(have)})")
    for i in range(1, len(have) + 1):
        if have[-i] != 1 and have[-i] != target[-i]:
            return (f"The expanded size of the tensor ({target[-i]}) must match the existing "
                    f"size ({have[-i]}) at non-singleton dimension {len(target) - i}.  Target "
                    f"sizes: {list(target)}.  Tensor sizes: {list(have)}")
    return broadcast_message([have, target])


@linear.derivative
def _linear_grads(grad, x, w, b, *, needs=(True, True, True)):
    """The gradients of input, of ``weight.t()`` (see ``reads_transposed`` below) and of bias,
    computed as PyTorch's mm computes them for ``mat2 = weight.t()``."""
    gx = gwt = None
    need_x, need_w = needs[:2]          # an input no needed gradient reads is an InputMeta
    if need_w:
        x = conj_grad(x)                # PyTorch's convention for complex: grad * conj(...)
    if need_x:
        w = conj_grad(w)
    if w.ndim == 1:                     # a vector weight (its t() is itself): out = x @ w
        if need_x:
            gx = grad.unsqueeze(-1) * w
        if need_w:
            gwt = (grad.unsqueeze(-1) * x).reshape(_rows(x.shape), w.shape[0]).sum(0)
        return gx, gwt, grad
    if need_x and grad_enabled():       # mat2.t(), for a graph built for the gradient
        w = w.t().t()
    if x.ndim == 1:                     # PyTorch's mm of x.unsqueeze(0), then a squeeze
        g2 = grad.unsqueeze(0)
        if need_x:
            gx = (g2 @ w).squeeze(0)
        if need_w:      # an outer product: an mm, as PyTorch's (autocast casts it)
            gwt = gradient_t(gradient_t(g2) @ x.unsqueeze(0))
        return gx, gwt, grad
    if x.ndim > 2:
        g2 = grad.reshape(_rows(x.shape), w.shape[0])
        if need_x:
            gx = (g2 @ w).reshape(x.shape)
        if need_w:
            gwt = gradient_t(gradient_t(g2) @ x.reshape(_rows(x.shape), x.shape[-1]))
    else:
        if need_x:
            gx = grad @ w
        if need_w:
            gwt = gradient_t(gradient_t(grad) @ x)
    return gx, gwt, grad


linear.reads_inputs((1,), (0,), ())     # x for the weight's gradient, weight for x's
linear.reads_transposed(1)              # PyTorch's addmm (or mm) reads weight.t()


@op("_linear_addmm(bias, input, weight)", inputs=3, method=False,
    grad_fn_name="AddmmBackward0")
def _linear_addmm(xp, b, x, w):
    """``linear`` of a matrix with a bias, its inputs in the order of PyTorch's addmm
    ``(bias, input, weight.t())``: the node a recorded linear makes (see above)."""
    return linear.forward(xp, x, w, b)


@_linear_addmm.derivative
def _(grad, b, x, w, *, needs=(True, True, True)):
    gx, gwt, gb = _linear_grads(grad, x, w, b, needs=(needs[1], needs[2], needs[0]))
    return gb, gx, gwt


_linear_addmm.reads_inputs((), (2,), (1,))
_linear_addmm.reads_transposed(2)


@op("_linear_mm(input, weight)", inputs=2, method=False, grad_fn_name="MmBackward0")
def _linear_mm(xp, x, w):
    """``linear`` of a matrix without bias: the node (PyTorch's mm of ``weight.t()``) a
    recorded linear makes (see above)."""
    return linear.forward(xp, x, w, None)


@_linear_mm.derivative
def _(grad, x, w, *, needs=(True, True)):
    return _linear_grads(grad, x, w, None, needs=(needs[0], needs[1], False))[:2]


_linear_mm.reads_inputs((1,), (0,))
_linear_mm.reads_transposed(1)
_linear_mm.packs_reversed = True        # PyTorch's mm packs mat2 (weight.t()), then self


# --- bilinear ---------------------------------------------------------------------------------

def bilinear(input1, input2, weight, bias=None):
    """Apply ``y = x1^T A x2 + b`` to the last dims of ``input1`` and ``input2``."""
    _check_bilinear_dtypes(input1, input2, weight, bias)
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-dimensional, but got {weight.ndim}D")
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.ndim} and "
                           f"{input2.ndim}")
    for i in range(input1.ndim - 1):
        if input1.shape[i] != input2.shape[i]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {i}: "
                               f"got {input1.shape[i]} and {input2.shape[i]}")
    for k, x in ((1, input1), (2, input2)):
        if x.shape[-1] != weight.shape[k]:
            raise RuntimeError(f"bilinear(): input{k} size does not match weight size: got "
                               f"{x.shape[-1]} but expected {weight.shape[k]}")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != weight.shape[0]):
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got "
                           f"{bias.shape[-1] if bias.ndim else 1} but expected "
                           f"{weight.shape[0]}")
    n_out, n1, n2 = weight.shape
    lead = input1.shape[:-1]
    x1 = input1.reshape(-1, n1)
    x2 = input2.reshape(-1, n2)
    with suspended(("cpu",)):           # PyTorch's CPU bilinear is no autocast op
        # (rows, n1) @ (n1, out * n2): one GEMM, then a product with x2 summed over n2
        t = (x1 @ weight.permute(1, 0, 2).reshape(n1, n_out * n2)).reshape(-1, n_out, n2)
        out = (t @ x2.unsqueeze(-1)).squeeze(-1)
    if bias is not None:
        out = out + bias
    return out.reshape(lead + (n_out,))


def _check_bilinear_dtypes(input1, input2, weight, bias):
    named = [("input1", input1), ("input2", input2), ("weight", weight)]
    named += [("bias", bias)] if bias is not None else []
    if len({t.dtype for _, t in named}) > 1:
        got = ", ".join(f"{name}: {_tensor_mm_name(t)}" for name, t in named)
        raise RuntimeError(f"All tensors must have the same dtype, got {got}")


def _tensor_mm_name(t):
    name = str(t.dtype).rpartition(".")[2]
    return _MM_NAMES.get(name, name)


ALIASES = {}
PUBLIC = {"bilinear": bilinear}
FUNCTIONAL = {"bilinear": bilinear}
