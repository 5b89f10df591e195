"""Affine maps of the nn layers: linear (``x @ W^T + b``, one GEMM) and bilinear
(``x1^T A x2 + b``).

linear flattens the leading dims of ``input`` so that the forward and both matrix gradients
are single 2-D GEMMs; 16-bit floats accumulate in float32 (natively on a GPU, on float32
copies on the CPU: ``backend.low_precision_product``).
"""

import numpy as np

from ember import _dtype as D
from ember.amp._state import suspended
from ember.backend import low_precision_product
from ember.backend.blas_threads import follow_load
from ember.ops._elementwise import conj_grad
from ember.ops._recording import gradient_t
from ember.ops._reduce import grad_enabled
from ember.ops._registry import broadcast_message, op

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
    if b is not None:       # with a bias PyTorch takes the addmm path and its messages
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
    rows = x.reshape(-1, x.shape[-1]) if x.ndim > 2 else x
    follow_load(xp)
    if dtype in _LOW:       # the CPU's float32 sums take the bias before rounding
        out = low_precision_product(xp, rows, w.T, float32_sums=True)
    else:
        out = rows @ w.T
    if x.ndim > 2:
        out = out.reshape(x.shape[:-1] + w.shape[:-1])
    if b is not None:
        if b.dtype != dtype:
            raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                               f"{D.FROM_NUMPY[b.dtype]._torch_name} and "
                               f"{D.FROM_NUMPY[dtype]._torch_name}")
        if out.ndim == 0 or b.ndim > out.ndim or any(
                s != 1 and s != t for s, t in zip(b.shape[::-1], out.shape[::-1])):
            raise RuntimeError(_expand_message(b.shape, out.shape))
        if out.ndim:
            out += b
        else:
            out = out + b
    return out.astype(dtype) if out.dtype != dtype else out


@linear.named_by
def _(flat, params, out):
    x, bias = flat[0], flat[2]      # PyTorch computes it by addmm or mm, then a view
    if x.ndim == 2:
        return "AddmmBackward0" if bias is not None else "MmBackward0"
    if bias is not None:    # a strided batch goes through matmul, then adds the bias
        dense = x.ndim == 1 or x._data.flags.c_contiguous or x.is_contiguous()
        return "ViewBackward0" if dense else "AddBackward0"
    return "SqueezeBackward4" if x.ndim == 1 else "UnsafeViewBackward0"


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
def _(grad, x, w, b, *, needs=(True, True, True)):
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
            gwt = (grad.unsqueeze(-1) * x).reshape(-1, w.shape[0]).sum(0)
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
        g2 = grad.reshape(-1, w.shape[0])
        if need_x:
            gx = (g2 @ w).reshape(x.shape)
        if need_w:
            gwt = gradient_t(gradient_t(g2) @ x.reshape(-1, x.shape[-1]))
    else:
        if need_x:
            gx = grad @ w
        if need_w:
            gwt = gradient_t(gradient_t(grad) @ x)
    return gx, gwt, grad


linear.reads_inputs((1,), (0,), ())     # x for the weight's gradient, weight for x's
linear.reads_transposed(1)              # PyTorch's addmm (or mm) reads weight.t()


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
