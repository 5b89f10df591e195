"""gradcheck and gradgradcheck: analytical vector-Jacobian products against finite differences.

For complex tensors PyTorch's convention holds: the gradient of a real loss ``L`` with respect
to ``z`` is ``dL/d(re z) + i dL/d(im z)``, so each complex input is perturbed along its real
and its imaginary axis.
"""

import numpy as np

from ember import _tensor
from ember.backend import host_array, on_device_of, xp_of

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised when analytical and numerical gradients disagree."""


def _tensors(inputs):
    return (inputs,) if isinstance(inputs, _tensor.Tensor) else tuple(inputs)


def _outputs(func, inputs):
    out = func(*inputs)
    if isinstance(out, _tensor.Tensor):
        return (out,)
    return tuple(o for o in out if isinstance(o, _tensor.Tensor))


def _numerical_jacobian(func, inputs, index, eps):
    """d(outputs)/d(input[index]) as a list per output of arrays (out.numel, in.numel[, 2])."""
    x = inputs[index]
    data = x._data
    flat = data.reshape(-1)             # inputs are made contiguous by the caller
    directions = (1.0, 1j) if data.dtype.kind == "c" else (1.0,)
    columns = []
    for j in range(flat.size):
        per_dir = []
        for d in directions:
            orig = flat[j]
            flat[j] = orig + eps * d
            plus = [_host(o) for o in _outputs(func, inputs)]
            flat[j] = orig - eps * d
            minus = [_host(o) for o in _outputs(func, inputs)]
            flat[j] = orig
            per_dir.append([((p - m) / (2 * eps)).reshape(-1) for p, m in zip(plus, minus)])
        columns.append(per_dir)
    return columns


def _host(t):
    """A tensor's values as a complex128 NumPy array (a GPU tensor's copied to the host)."""
    return host_array(t._data).astype(np.complex128)


def _on_device_of(host, t):
    """A NumPy array as a tensor on ``t``'s device (cotangents and tangents go where the
    outputs and inputs live: a CUDA tensor's backward cannot take a CPU gradient)."""
    return _tensor._make(on_device_of(host, t._data))


def _vjp(outputs, inputs, vs):
    from ember.autograd import grad
    diff_out = [(o, v) for o, v in zip(outputs, vs) if o.requires_grad]
    if not diff_out:
        return [None] * len(inputs)
    # inputs may hold numbers too (``gradcheck(f, (x, 2))``): they get no gradient
    needed = [isinstance(x, _tensor.Tensor) and x.requires_grad for x in inputs]
    wanted = [x for x, need in zip(inputs, needed) if need]
    gs = grad([o for o, _ in diff_out], wanted, [v for _, v in diff_out], retain_graph=True,
              allow_unused=True)
    it = iter(gs)
    return [next(it) if need else None for need in needed]


def _directions(outputs, rng):
    """Cotangents to test: unit vectors for small outputs, random ones otherwise."""
    total = sum(o.numel() for o in outputs)
    if total <= 32:
        for k in range(total):
            for scale in ((1.0, 1j) if any(o.is_complex() for o in outputs) else (1.0,)):
                vs, pos = [], 0
                for o in outputs:
                    v = np.zeros(o.numel(), dtype=np.complex128)
                    if pos <= k < pos + o.numel():
                        v[k - pos] = scale
                    pos += o.numel()
                    vs.append(v)
                yield vs
    else:
        for _ in range(4):
            yield [rng.standard_normal(o.numel()) + (1j * rng.standard_normal(o.numel())
                                                      if o.is_complex() else 0)
                   for o in outputs]


_NONDET_MSG = (
    "Backward is not reentrant, i.e., running backward with same input and grad_output "
    "multiple times gives different values, although analytical gradient matches numerical "
    "gradient.The tolerance for nondeterminism was {}.\n\n"
    "NOTE: If your op relies on non-deterministic operations i.e., it is listed here:\n"
    "https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html\n"
    "this failure might be expected.\n\n"
    "If you are adding a new operator, please file an issue and then use one of the\n"
    "workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.\n"
    "If the test\n"
    "- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck\n"
    "  with `nondet_tol=<tol>` as a keyword argument.\n"
    "- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test\n"
    "  to have `gradcheck_nondet_tol=<tol>`.\n"
    "- is a Module test (e.g., in common_nn.py), then modify the corresponding\n"
    "  module_test entry to have `gradcheck_nondet_tol=<tol>`\n")


def _reentrant(first, second, nondet_tol):
    """Whether two backward passes over the same graph gave the same gradients (torch runs
    each vector-Jacobian product twice: a backward that edits what it saved fails here)."""
    for a, b in zip(first, second):
        if a is None or b is None or a.numel() == 0:
            continue
        if np.abs(_host(a) - _host(b)).max() > nondet_tol:
            return False
    return True


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False, masked=None):
    """Check ``func``'s analytical gradients against central finite differences."""
    import warnings
    inputs = _tensors(inputs)
    for i, x in enumerate(inputs):
        if isinstance(x, _tensor.Tensor) and x.requires_grad and x.dtype.name not in (
                "float64", "complex128"):
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating "
                          f"point or complex. This check will likely fail if all the inputs are "
                          f"not of double precision floating point or complex.")
    inputs = tuple(_contiguous_leaf(x) for x in inputs)
    outputs = _outputs(func, inputs)
    diff_idx = [i for i, x in enumerate(inputs)
                if isinstance(x, _tensor.Tensor) and x.requires_grad]
    numerical = {i: _numerical_jacobian(func, inputs, i, eps) for i in diff_idx}
    if check_forward_ad and not _forward_ad_agrees(func, inputs, numerical, rtol, atol,
                                                   raise_exception):
        return False
    rng = np.random.default_rng(0)
    for k, vs in enumerate(_directions(outputs, rng) if check_backward_ad else ()):
        cotangents = [_on_device_of((v if o.is_complex() else v.real).astype(o._data.dtype)
                                    .reshape(o.shape), o) for v, o in zip(vs, outputs)]
        analytical = _vjp(outputs, inputs, cotangents)
        # torch repeats every product; once (the first) finds a backward that edits what it
        # saved or draws at random, at a fraction of the cost to the OpInfo suite
        if k == 0 and not _reentrant(analytical, _vjp(outputs, inputs, cotangents),
                                     nondet_tol):
            if not raise_exception:
                return False
            raise GradcheckError(_NONDET_MSG.format(nondet_tol))
        for i in diff_idx:
            cols = numerical[i]
            num = np.zeros(len(cols), dtype=np.complex128)
            for j, per_dir in enumerate(cols):
                for d, jac_cols in zip((1.0, 1j), per_dir):
                    num[j] += d * sum(np.real(np.conj(v) * c).sum()
                                      for v, c in zip(vs, jac_cols))
            got = analytical[i]
            ana = np.zeros(len(cols)) if got is None else _host(got).reshape(-1)
            if not np.allclose(ana, num, rtol=rtol, atol=atol, equal_nan=True):
                if not raise_exception:
                    return False
                raise GradcheckError(
                    f"Jacobian mismatch for output 0 with respect to input {i},\n"
                    f"numerical:{_fmt(num)}\nanalytical:{_fmt(ana)}\n")
    return True


def _forward_ad_agrees(func, inputs, numerical, rtol, atol, raise_exception):
    """Whether forward-mode jvps along each input element match the finite differences."""
    for i, cols in numerical.items():
        for j, per_dir in enumerate(cols):
            for d, jac_cols in zip((1.0, 1j), per_dir):
                tangents = _jvp_outputs(func, inputs, i, j, d)
                for k, (got, num) in enumerate(zip(tangents, jac_cols)):
                    ana = np.zeros(num.shape) if got is None else got
                    if not np.allclose(ana, num, rtol=rtol, atol=atol, equal_nan=True):
                        if not raise_exception:
                            return False
                        raise GradcheckError(
                            f"Jacobian computed with forward mode mismatch for output {k} with "
                            f"respect to input {i},\nnumerical:{_fmt(num)}\n"
                            f"analytical:{_fmt(np.asarray(ana, dtype=np.complex128))}\n")
    return True


def _jvp_outputs(func, inputs, i, j, direction):
    """The output tangents (flat arrays, None where absent) along element ``j`` of input ``i``."""
    from ember.autograd import forward_ad
    x = inputs[i]
    t = np.zeros(x.numel(), dtype=x._data.dtype)
    t[j] = direction
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(x, _on_device_of(t.reshape(x._data.shape), x))
        outs = _outputs(func, inputs[:i] + (dual,) + inputs[i + 1:])
        tangents = [forward_ad.unpack_dual(o).tangent for o in outs]
        return [None if t is None else _host(t).reshape(-1) for t in tangents]


def _fmt(values):
    if np.all(values.imag == 0):
        values = values.real
    return np.array2string(values, precision=6, threshold=50)


def _contiguous_leaf(x):
    if not isinstance(x, _tensor.Tensor):
        return x
    if x.is_contiguous() and x.is_leaf:
        return x
    y = _tensor._make(xp_of(x._data).ascontiguousarray(x._data))
    y._requires_grad = x.requires_grad
    return y


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """Check second derivatives: gradcheck of the vector-Jacobian product of ``func``."""
    from ember.autograd import grad
    inputs = tuple(_contiguous_leaf(x) for x in _tensors(inputs))
    outputs = _outputs(func, inputs)
    rng = np.random.default_rng(1)
    outputs = [o for o in outputs if o.is_floating_point() or o.is_complex()]
    if grad_outputs is None:
        grad_outputs = []
        for o in outputs:
            v = rng.standard_normal(o.shape)
            if o.is_complex():
                v = v + 1j * rng.standard_normal(o.shape)
            g = _on_device_of(np.asarray(v).astype(o._data.dtype), o)
            g.requires_grad_(True)
            grad_outputs.append(g)
    grad_outputs = _tensors(grad_outputs)
    n = len(inputs)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, _tensor.Tensor) and x.requires_grad]

    def first_order(*args):
        xs, gos = args[:n], args[n:]
        outs = [o for o in _outputs(func, xs) if o.is_floating_point() or o.is_complex()]
        pairs = [(o, g) for o, g in zip(outs, gos) if o.requires_grad]
        wanted = [xs[i] for i in diff]
        return grad([o for o, _ in pairs], wanted, [g for _, g in pairs], create_graph=True,
                    allow_unused=True, materialize_grads=True)

    return gradcheck(first_order, inputs + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
