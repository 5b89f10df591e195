"""Products with an added term, ``beta * input + alpha * product``: addmm, addmv, addr,
baddbmm, addbmm. The other products live in ops/contractions.py and ops/einsum.py.

As in PyTorch: ``input`` broadcasts to the product's shape; beta=0 ignores it (NaN and inf in
it do not propagate); alpha and beta are converted to the result dtype with PyTorch's checks
(a float scale truncates for integer tensors, except in addr, which refuses it). Where
PyTorch calls BLAS, alpha=0 skips the product, so NaN in the operands does not show either:
addmm and addbmm in 32/64-bit floats and complex, addmv in real floats, baddbmm when the
product has 400 or more multiplications per batch. Shape and dtype checks run in the order of
the PyTorch kernel, with its messages.
"""

import numpy as np

from ember import _dtype as D
from ember.backend import low_precision_product
from ember.backend.blas_threads import follow_load
from ember.ops import contractions, einsum
from ember.ops.contractions import AS_TENSORS
from ember.ops._dims import wrap_dim
from ember.ops._elementwise import conj_grad
from ember.ops._registry import op
from ember.ops._scalars import checked_scalar, number_arg
from ember.ops.indexing import CTYPE
from ember.ops.linalg import _h, _name, check_mm_shapes
from ember.ops.shape import expand

_LOW = D.LOW_PRECISION_NP
_F32 = np.dtype(np.float32)


def _expand(xp, m, shape):
    """``input`` broadcast to the product's shape, with the messages of PyTorch's expand."""
    return m if m.shape == shape else expand.forward(xp, m, shape)


def _size(t, dim):
    return t.shape[wrap_dim(dim, t.ndim)]


def _no_bool(a, kernel):
    if a.dtype == np.bool_:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


def _combine(xp, m, product, beta, alpha, shape, blas):
    """``beta * m + alpha * product(compute dtype)`` in the operands' dtype (16-bit floats
    in float32); ``blas``: PyTorch's kernel skips the product when alpha is 0."""
    low = m.dtype if m.dtype in _LOW else None
    compute = _F32 if low is not None else m.dtype
    b = _scale(xp, beta, compute)
    a = _scale(xp, alpha, compute)
    if alpha == 0 and blas and low is None:
        out = None                      # BLAS never reads the operands when alpha is 0
    else:
        out = product(compute)
        if alpha != 1:
            out = out * a
    if beta != 0:
        m = m.astype(compute) if low is not None else m
        term = m if beta == 1 else m * b
        out = xp.broadcast_to(term, shape).copy() if out is None else out + term
    elif out is None:
        out = xp.zeros(shape, dtype=compute)
    return out.astype(low) if low is not None else out


def _numbers(fname, beta, alpha):
    """beta and alpha as Python numbers, checked as PyTorch parses its Scalar arguments."""
    return number_arg(beta, fname, "beta"), number_arg(alpha, fname, "alpha")


def _scale(xp, value, dtype):
    """alpha or beta in ``dtype``, checked as PyTorch does (0 and 1 need no check)."""
    if type(value) is int and value in (0, 1):
        return value
    return checked_scalar(xp, value, dtype)


def _cast(arrays, dtype):
    return [x if x.dtype == dtype else x.astype(dtype) for x in arrays]


def _matmul(xp, a, b):
    """The product ``_combine`` asks for: ``a @ b`` in the compute dtype, or for 16-bit
    floats their float32 sums (a GPU's native product, rounded, on tensor cores)."""
    follow_load(xp)
    if a.dtype in _LOW:
        return lambda dt: low_precision_product(xp, a, b, float32_sums=True)
    return lambda dt: xp.matmul(*_cast((a, b), dt))


def _scaled(grad, s):
    """``grad * conj(s)``, or ``grad`` itself when ``s`` is 1 (PyTorch's maybe_multiply)."""
    return grad if s == 1 else grad * conj_grad(s)


# --- addmm, addbmm ----------------------------------------------------------------------------

def _check_mm_dtypes(m, a, b):
    if m.dtype != b.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {_name(m)} and "
                           f"{_name(b)}")
    if a.dtype != b.dtype:
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {_name(a)} and "
                           f"{_name(b)}")


@op("addmm(input, mat1, mat2, *, beta=1, alpha=1)", inputs=3, out=True, inplace=True)
def addmm(xp, m, a, b, beta, alpha):
    """``beta * input + alpha * (mat1 @ mat2)`` for matrices; ``input`` broadcasts."""
    beta, alpha = _numbers("addmm", beta, alpha)
    for name, x in (("mat1", a), ("mat2", b)):
        if x.ndim != 2:
            raise RuntimeError(f"{name} must be a matrix, got {x.ndim}-D tensor")
    check_mm_shapes(a, b)
    _check_mm_dtypes(m, a, b)
    shape = (a.shape[0], b.shape[1])
    m = _expand(xp, m, shape)
    _no_bool(a, "addmm_impl_cpu_")
    return _combine(xp, m, _matmul(xp, a, b), beta, alpha, shape, True)


@addmm.derivative
def _(grad, m, a, b, beta, alpha, *, needs=(True, True, True)):
    g = _scaled(grad, alpha)
    return (_scaled(grad, beta) if needs[0] else None, g.mm(_h(b)) if needs[1] else None,
            _h(a).mm(g) if needs[2] else None)


@op("addbmm(input, batch1, batch2, *, beta=1, alpha=1)", inputs=3, out=True, inplace=True)
def addbmm(xp, m, a, b, beta, alpha):
    """``beta * input + alpha * sum_i(batch1[i] @ batch2[i])``; ``input`` broadcasts."""
    beta, alpha = _numbers("addbmm", beta, alpha)
    shape = (_size(a, 1), _size(b, 2))
    m = _expand(xp, m, shape)
    for name, x in (("batch1", a), ("batch2", b)):
        if x.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got "
                           f"{a.shape[0]} and {b.shape[0]}")
    if a.shape[2] != b.shape[1]:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({a.shape[1]}x{a.shape[2]} and "
                           f"{b.shape[1]}x{b.shape[2]})")
    _check_mm_dtypes(m, a, b)
    _no_bool(a, "addmm_impl_cpu_")

    def product(dt):
        a2, b2 = _cast((a, b), dt)
        # one GEMM: (n, batch * k) @ (batch * k, p) sums the batch of products
        n, k = a2.shape[1], a2.shape[0] * a2.shape[2]
        return xp.matmul(a2.transpose(1, 0, 2).reshape(n, k), b2.reshape(k, b2.shape[2]))
    return _combine(xp, m, product, beta, alpha, shape, True)


@addbmm.derivative
def _(grad, m, a, b, beta, alpha, *, needs=(True, True, True)):
    g = _scaled(grad, alpha)
    return (_scaled(grad, beta) if needs[0] else None, g @ _h(b) if needs[1] else None,
            _h(a) @ g if needs[2] else None)


# --- baddbmm ----------------------------------------------------------------------------------

@op("baddbmm(input, batch1, batch2, *, beta=1, alpha=1)", inputs=3, out=True, inplace=True)
def baddbmm(xp, m, a, b, beta, alpha):
    """``beta * input + alpha * (batch1 @ batch2)`` for batches; ``input`` broadcasts."""
    beta, alpha = _numbers("baddbmm", beta, alpha)
    shape = (_size(a, 0), _size(a, 1), _size(b, 2))
    m = _expand(xp, m, shape)
    for name, x in (("batch1", a), ("batch2", b)):
        if x.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    if m.dtype != a.dtype:
        raise RuntimeError(f"Input dtypes must be the same, got: input {_ctype(m)}, batch1: "
                           f"{_ctype(a)}, batch2: {_ctype(b)}")
    if b.shape[:2] != (a.shape[0], a.shape[2]):
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, "
                           f"{b.shape[1]}].")
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected scalar type {_name(a)} but found {_name(b)}")
    _no_bool(a, "baddbmm")
    return _combine(xp, m, _matmul(xp, a, b), beta, alpha, shape,
                    a.shape[1] * a.shape[2] * b.shape[2] >= 400)


def _ctype(a):
    return CTYPE[D.FROM_NUMPY[a.dtype]]


@baddbmm.derivative
def _(grad, m, a, b, beta, alpha, *, needs=(True, True, True)):
    g = _scaled(grad, alpha)
    return (_scaled(grad, beta) if needs[0] else None, g.bmm(_h(b)) if needs[1] else None,
            _h(a).bmm(g) if needs[2] else None)


# --- addmv ------------------------------------------------------------------------------------

@op("addmv(input, mat, vec, *, beta=1, alpha=1)", inputs=3, out=True, inplace=True)
def addmv(xp, m, a, v, beta, alpha):
    """``beta * input + alpha * (mat @ vec)``; ``input`` broadcasts."""
    beta, alpha = _numbers("addmv", beta, alpha)
    if a.ndim != 2 or v.ndim != 1 or m.ndim > 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {m.ndim}, {a.ndim}, "
                           f"{v.ndim}")
    if a.shape[1] != v.shape[0] or m.size not in (a.shape[0], 1):
        raise RuntimeError(f"size mismatch, got input ({m.size}), mat ({a.shape[0]}x"
                           f"{a.shape[1]}), vec ({v.shape[0]})")
    if not m.dtype == a.dtype == v.dtype:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got {_name(m)}, "
                           f"{_name(a)}, and {_name(v)}")
    _no_bool(a, "addmv_impl_cpu")
    shape = (a.shape[0],)
    return _combine(xp, m.reshape(m.shape or (1,)), lambda dt: xp.matmul(*_cast((a, v), dt)),
                    beta, alpha, shape, a.dtype.kind == "f")


@addmv.derivative
def _(grad, m, a, v, beta, alpha, *, needs=(True, True, True)):
    g = _scaled(grad, alpha)
    return (_scaled(grad, beta) if needs[0] else None,
            g.unsqueeze(1) * conj_grad(v) if needs[1] else None,
            _h(a).mv(g) if needs[2] else None)


# --- addr -------------------------------------------------------------------------------------

def _check_scale(value, name, dtype):
    if dtype.kind in "biu":
        if isinstance(value, (float, complex)):
            raise RuntimeError(f"For integral input tensors, argument {name} must not be a "
                               f"floating point number.")
    if dtype.kind != "b" and isinstance(value, bool):
        raise RuntimeError(f"Boolean {name} only supported for Boolean results.")


@op("addr(input, vec1, vec2, *, beta=1, alpha=1)", inputs=3, promote=AS_TENSORS,
    upcast=False, scalars=False, inplace=True)
def addr(xp, m, u, v, beta, alpha):
    """``beta * input + alpha * outer(vec1, vec2)``; ``input`` broadcasts (bools: and/or)."""
    beta, alpha = _numbers("addr", beta, alpha)
    for name, x in (("vec1", u), ("vec2", v)):
        if x.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {x.ndim}-D")
    shape = (u.shape[0], v.shape[0])
    m = _expand(xp, m, shape)
    _check_scale(beta, "beta", m.dtype)
    _check_scale(alpha, "alpha", m.dtype)
    # 16-bit floats: PyTorch rounds the outer product to the dtype before scaling and adding
    return _combine(xp, m, lambda dt: (u[:, None] * v[None, :]).astype(dt), beta, alpha,
                    shape, False)


@addr.derivative
def _(grad, m, u, v, beta, alpha, *, needs=(True, True, True)):
    g = _scaled(grad, alpha)
    return (_scaled(grad, beta) if needs[0] else None,
            (g * conj_grad(v)).sum(1) if needs[1] else None,
            (g * conj_grad(u).unsqueeze(1)).sum(0) if needs[2] else None)


# no gradient reads input; each factor is read only by the other's
for _product in (addmm, addbmm, baddbmm, addmv, addr):
    _product.reads_inputs((), (2,), (1,))


ALIASES = {**contractions.ALIASES, **einsum.ALIASES}
PUBLIC = {**contractions.PUBLIC, **einsum.PUBLIC}
