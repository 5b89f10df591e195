"""Householder reflectors: geqrf (LAPACK's packed QR: the reflectors and R in one matrix) and
their product, linalg.householder_product (LAPACK's orgqr/ungqr), also named orgqr.

Column i of A below the diagonal, with a 1 on the diagonal, is the vector v_i of the
reflector H_i = I - tau_i v_i v_i^H; the result is the first n columns of H_0 H_1 ... H_{k-1}
(k = tau.shape[-1] <= n <= m), what ``geqrf`` packs into A and tau. The upper triangle and the
diagonal of A are not read, so they get no gradient.

``ormqr`` multiplies a matrix by the full m x m Q of a geqrf factorisation (or by Q^H), from
the left or the right.
"""

from ember.ops._linalg_utils import check_kernel, column_major, mh, named_result, torch_name
from ember.ops._registry import op

__all__ = ["geqrf", "householder_product", "orgqr", "ormqr"]

geqrf_result = named_result("geqrf", ("a", "tau"))

_NAME = "torch.linalg.householder_product"


def _check_tau_ndim(name, a, tau):
    if tau.ndim != a.ndim - 1:
        raise RuntimeError(f"{name}: Expected tau to have one dimension less than input, but "
                           f"got tau.ndim equal to {tau.ndim} and input.ndim is equal to "
                           f"{a.ndim}")


def _check(a, tau):
    if a.ndim < 2:
        raise RuntimeError(f"{_NAME}: input must have at least 2 dimensions.")
    if a.shape[-2] < a.shape[-1]:
        raise RuntimeError(f"{_NAME}: input.shape[-2] must be greater than or equal to "
                           f"input.shape[-1]")
    if tau.ndim == 0:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    if a.shape[-1] < tau.shape[-1]:
        raise RuntimeError(f"{_NAME}: input.shape[-1] must be greater than or equal to "
                           f"tau.shape[-1]")
    _check_tau_ndim(_NAME, a, tau)
    if tau.shape[:-1] != a.shape[:-2]:
        raise RuntimeError(f"{_NAME}: Expected batch dimensions of tau to be equal to "
                           f"input.shape[:-2], but got {list(tau.shape[:-1])}")
    if tau.dtype != a.dtype:
        raise RuntimeError(f"{_NAME}: tau dtype {torch_name(tau)} does not match input dtype "
                           f"{torch_name(a)}")
    check_kernel(a, "orgqr_cpu")


def _product(xp, a, tau):
    _check(a, tau)
    m, n = a.shape[-2:]
    q = xp.broadcast_to(xp.eye(m, n, dtype=a.dtype), a.shape).copy()
    for i in range(tau.shape[-1] - 1, -1, -1):
        # H_i changes rows i: only (v_i is zero above its unit entry i)
        v = a[..., i:, i:i + 1].copy()
        v[..., 0, :] = 1
        rows = q[..., i:, :]
        rows -= tau[..., i, None, None] * (v @ (v.conj().swapaxes(-1, -2) @ rows))
    return column_major(xp, q)


def _product_grad(grad, a, tau, *, out=None):
    # (``out`` unread: PyTorch's node keeps the result, so writing it before backward raises)
    # Q = R_0 with R_i = H_i R_{i+1}, R_k = E (the first n columns of I). Going down the
    # chain with G_i, the gradient of R_i: with a = G_i^H v_i and b = R_{i+1}^H v_i,
    # d tau_i = -a^H b, d v_i = -conj(tau_i) G_i b - tau_i R_{i+1} a, G_{i+1} = H_i^H G_i.
    from ember._creation import eye
    from ember.ops.join import cat, stack
    m, n = a.shape[-2:]
    k = tau.shape[-1]
    if k == 0:                          # the identity: PyTorch leaves the gradients unset
        return None, None
    identity = eye(m, n, dtype=a.dtype, device=a.device)
    vs = a.tril(-1) + identity
    complex_ = a.is_complex()
    tau_c = tau.conj() if complex_ else tau
    after = [identity.expand(a.shape)]      # R_k, R_{k-1}, ..., R_1
    for i in range(k - 1, 0, -1):
        v = vs[..., :, i:i + 1]
        after.append(after[-1] - tau[..., i, None, None] * (v @ (mh(v) @ after[-1])))
    g = grad
    grad_tau, grad_v = [], []
    for i in range(k):
        v = vs[..., :, i:i + 1]
        r = after[k - 1 - i]
        ga, rb = mh(g) @ v, mh(r) @ v
        grad_tau.append(-((ga.conj() if complex_ else ga) * rb).sum((-2, -1)))
        grad_v.append(-tau_c[..., i, None, None] * (g @ rb) - tau[..., i, None, None] * (r @ ga))
        if i + 1 < k:
            g = g - tau_c[..., i, None, None] * (v @ mh(ga))
    grad_vs = cat(grad_v, -1)
    if k < n:
        grad_vs = cat([grad_vs, grad_vs.new_zeros(a.shape[:-1] + (n - k,))], -1)
    return grad_vs.tril(-1), stack(grad_tau, -1)


@op("householder_product(input, tau)", inputs=2, namespace="linalg", out=True)
def householder_product(xp, a, tau):
    """The first n columns of the product of the Householder reflectors I - tau_i v_i v_i^H,
    v_i column i of ``input`` below the diagonal with a unit diagonal entry."""
    return _product(xp, a, tau)


@op("orgqr(input, input2)", inputs=2, out=True,
    grad_fn_name="LinalgHouseholderProductBackward0")
def orgqr(xp, a, tau):
    """The product of Householder reflectors (``linalg.householder_product``)."""
    return _product(xp, a, tau)


householder_product.derivative(_product_grad)
orgqr.derivative(_product_grad)


_ORMQR = "torch.ormqr"


def _check_dtypes(a, tau, c):
    for name, t in (("tau", tau), ("other", c)):
        if t.dtype != a.dtype:
            # PyTorch's wording, its missing space included
            raise RuntimeError(f"{_ORMQR}: Expected input and {name} to have the same dtype, "
                               f"but input has dtype{torch_name(a)} and {name} has dtype "
                               f"{torch_name(t)}")
    check_kernel(a, "ormqr_cpu")


def _ormqr_check(a, tau, c, left):
    """PyTorch's checks of ormqr's arguments, in its order."""
    for name, t in (("input", a), ("other", c)):
        if t.ndim < 2:
            raise RuntimeError(f"{_ORMQR}: {name} must have at least 2 dimensions.")
    if (c.shape[-2] if left else c.shape[-1]) != a.shape[-2]:
        raise RuntimeError(f"{_ORMQR}: other.shape[{-2 if left else -1}] must be equal to "
                           f"input.shape[-2]")
    if tau.ndim == 0:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    if tau.shape[-1] != min(a.shape[-2:]):
        raise RuntimeError(f"{_ORMQR}: tau.shape[-1] must be equal to min(other.shape[-2], "
                           f"input.shape[-1])")
    _check_tau_ndim(_ORMQR, a, tau)
    if c.ndim != a.ndim:
        raise RuntimeError(f"{_ORMQR}: Expected other to have the same number of dimensions as "
                           f"input, but got other.ndim equal to {c.ndim} and input.ndim is "
                           f"equal to {a.ndim}")
    for name, t in (("tau", tau), ("other", c)):
        if t.shape[:a.ndim - 2] != a.shape[:-2]:
            raise RuntimeError(f"{_ORMQR}: Expected batch dimensions of {name} to be equal to "
                               f"input.shape[:-2], but got {list(t.shape[:a.ndim - 2])}")
    _check_dtypes(a, tau, c)


@op("ormqr(input, input2, input3, left=True, transpose=False)", inputs=3, out=True)
def ormqr(xp, a, tau, c, left, transpose):
    """``input3`` multiplied by the Q of a geqrf factorisation (``input``, ``input2``) from
    the left (or the right), or by Q^H when ``transpose``."""
    _ormqr_check(a, tau, c, left)
    m, k = a.shape[-2], tau.shape[-1]
    square = xp.zeros(a.shape[:-2] + (m, m), a.dtype)
    square[..., :k] = a[..., :k]
    q = _product(xp, square, tau)                   # the full m x m Q
    if transpose:
        q = q.conj().swapaxes(-1, -2)
    return column_major(xp, q @ c if left else c @ q)


@ormqr.derivative
def _(grad, a, tau, c, left, transpose, *, needs=(True, True, True)):
    from ember.ops.join import cat
    m, n = a.shape[-2:]
    k = tau.shape[-1]
    square = a[..., :k]
    if k < m:
        square = cat([square, square.new_zeros(a.shape[:-2] + (m, m - k))], -1)
    q = householder_product(square, tau)
    op_q = mh(q) if transpose else q                # out = op_q @ c (left) or c @ op_q
    grad_c = (mh(op_q) @ grad if left else grad @ mh(op_q)) if needs[2] else None
    if not (needs[0] or needs[1]) or k == 0:
        return None, None, grad_c
    grad_op_q = grad @ mh(c) if left else mh(c) @ grad
    grad_square, grad_tau = _product_grad(mh(grad_op_q) if transpose else grad_op_q, square,
                                          tau)
    grad_a = grad_square[..., :k]
    if k < n:
        grad_a = cat([grad_a, grad_a.new_zeros(a.shape[:-1] + (n - k,))], -1)
    return grad_a, grad_tau, grad_c


@op("geqrf(input)", out=True, namedtuple=geqrf_result)
def geqrf(xp, a):
    """(a, tau): R on and above the diagonal of ``a``, the Householder vectors of Q below it
    and their scalars in ``tau`` (LAPACK's geqrf); ``householder_product(a, tau)`` gives Q."""
    if a.ndim < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    check_kernel(a, "geqrf_cpu")
    packed, tau = xp.linalg.qr(a, mode="raw")      # LAPACK's column-major result, transposed
    return column_major(xp, packed.swapaxes(-1, -2)), tau


geqrf.refuse_complex_grad()


geqrf.refuse_forward_ad("geqrf")


@geqrf.derivative
def _(grads, a):
    raise NotImplementedError("the derivative for 'geqrf' is not implemented.")
