"""How PyTorch words two ``out=`` refusals, where the words are not the op's own.

An ``out=`` call whose inputs require grad is refused in the name of the kernel PyTorch runs
(``torch.square(x, out=o)`` as ``pow()``, ``torch.fft.rfft`` as ``_fft_r2c()``), or not at
all where PyTorch's op has no derivative: the result is written, untracked. (PyTorch's
composites, ``softmax`` or ``linalg.norm``, write their tracked result into ``out`` through
``copy_``; ember refuses those calls, in the op's name.) And a result that cannot be cast
safely into ``out`` is refused in some ops' own words rather than the common "result type
... can't be cast ...". Both are facts of PyTorch's kernels, kept here in tables read only on
those paths (ops/_out.py).
"""

from ember._tensor import Tensor

__all__ = ["grad_refusal_kernel", "cast_refusal", "not_implemented_kernel", "COPIED_OUT",
           "KERNEL_CHECKS_AFTER", "copies_out"]

# ops PyTorch has no derivative for: their out= variant writes into ``out`` untracked,
# whatever requires grad
_UNTRACKED = frozenset("""eq ne lt le gt ge logical_and logical_or logical_xor logical_not
    argmax argmin signbit isposinf isneginf all any special.bessel_j0 special.bessel_j1
    special.bessel_y0 special.bessel_y1 special.modified_bessel_i0 special.modified_bessel_i1
    special.modified_bessel_k0 special.modified_bessel_k1 special.scaled_modified_bessel_k0
    special.scaled_modified_bessel_k1 special.spherical_bessel_j0 special.airy_ai
    searchsorted bucketize histc isin linalg.matrix_rank
    special.chebyshev_polynomial_t special.chebyshev_polynomial_u
    special.chebyshev_polynomial_v special.chebyshev_polynomial_w
    special.shifted_chebyshev_polynomial_t special.shifted_chebyshev_polynomial_u
    special.shifted_chebyshev_polynomial_v special.shifted_chebyshev_polynomial_w
    special.hermite_polynomial_h special.hermite_polynomial_he special.laguerre_polynomial_l
    special.legendre_polynomial_p""".split())

# ops whose out= variant, inputs requiring grad, PyTorch runs as a kernel without derivative
# (as it does every call of those declaring ``Op.not_implemented``), and still records: out
# gets a node named NotImplemented refusing backward in the kernel's name (op -> the kernel)
NOT_IMPLEMENTED_OUT = {
    "histogram": "histogram", "softmax": "softmax", "log_softmax": "log_softmax",
    "conj_physical": "conj_physical", "linalg.eigvals": "linalg_eigvals",
    "diag": lambda inputs: "diag_embed" if inputs[0].ndim == 1 else "diagonal_copy",
    # the inverse FFTs of a real signal conjugate their r2c result in place, in out
    "fft.ifft": lambda inputs: None if _complex_input(inputs) else "conj_physical",
    "fft.ihfft": "conj_physical"}

# PyTorch's composites whose out= variant, inputs requiring grad, computes the result with
# its graph and copies it into out: out's node is CopyBackwards
COPIED_OUT = frozenset("""tensordot inner linalg.norm linalg.matrix_norm linalg.cond
    linalg.tensorinv linalg.tensorsolve quantile nanquantile special.ndtr
    linalg.matrix_power matrix_power""".split())


def _power_kernel(params):
    """matrix_power's out= kernel: none for n = 0 (written untracked), a copy of its input
    for n = 1 (recorded), else the inverse or the products it runs (refused)."""
    n = params[0] if params else None
    return None if n in (0, 1) else "linalg_inv_ex" if n == -1 else "matmul"


# ops of COPIED_OUT that copy only for some parameters: op -> fn(params)
_COPIES_WHEN = dict.fromkeys(("linalg.matrix_power", "matrix_power"),
                             lambda params: params[0] == 1)


def copies_out(op, params):
    """Whether ``op``'s out= call with inputs requiring grad copies a recorded result."""
    when = _COPIES_WHEN.get(op.name)
    return op.name in COPIED_OUT and (when is None or when(params))


def not_implemented_kernel(op, inputs, params=()):
    """The kernel named by the NotImplemented node ``op``'s out= call records, or None where
    the call is refused or written untracked."""
    by_params = _NOT_IMPLEMENTED_WHEN.get(op.name)
    if by_params is not None:
        return by_params(params)
    kernel = op.not_implemented_kernel or NOT_IMPLEMENTED_OUT.get(op.name)
    return kernel(inputs) if callable(kernel) else kernel


# ops with no derivative for some parameters (scatter's reduce overloads): op -> fn(params)
_NOT_IMPLEMENTED_WHEN = {"scatter": lambda params: None if params[2] is None else "scatter"}

# op -> the kernel PyTorch's refusal names
_KERNELS = {
    "nn.functional.logsigmoid": "log_sigmoid_forward", "_max_dim": "max", "_min_dim": "min",
    "_median_dim": "median", "_nanmedian_dim": "nanmedian",
    "square": "pow", "float_power": "pow", "diff": "sub", "kron": "mul", "outer": "mul",
    "cross": "linalg_cross", "linalg.cross": "linalg_cross", "linalg.vecdot": "sum",
    "linalg.multi_dot": "mm", "linalg.inv": "linalg_inv_ex", "inverse": "linalg_inv_ex",
    "linalg.solve": "_linalg_solve_ex", "linalg.solve_ex": "_linalg_solve_ex",
    "linalg.solve_triangular": "linalg_solve_triangular",
    "linalg.lu_factor": "linalg_lu_factor_ex", "linalg.lu_factor_ex": "linalg_lu_factor_ex",
    "linalg.lu_solve": "linalg_lu_solve", "linalg.det": "_linalg_det",
    "linalg.slogdet": "_linalg_slogdet", "slogdet": "_linalg_slogdet",
    "linalg.vector_norm": "linalg_vector_norm", "norm": "linalg_vector_norm",
    "linalg.pinv": "linalg_pinv", "linalg.svdvals": "_linalg_svd",
    "linalg.householder_product": "linalg_householder_product",
    "orgqr": "linalg_householder_product", "nanmean": "nansum", "take_along_dim": "gather",
    "msort": "sort", "argsort": "sort",
    **{f"special.{n}": f"special_{n}" for n in (
        "i0e", "i1", "i1e", "ndtri", "log_ndtr", "erfcx", "entr", "xlog1py", "zeta")},
    # the FFTs run a real-to-complex, complex-to-complex or complex-to-real kernel
    **dict.fromkeys(("fft.fft2", "fft.ifft2", "fft.fftn", "fft.ifftn", "fft.ihfft2",
                     "fft.ihfftn"), "_fft_c2c"),
    **dict.fromkeys(("fft.rfft", "fft.rfft2", "fft.rfftn"), "_fft_r2c"),
    **dict.fromkeys(("fft.irfft", "fft.irfft2", "fft.irfftn", "fft.hfft", "fft.hfft2",
                     "fft.hfftn"), "_fft_c2r"),
}


# ops whose refusal names another kernel but whose own checks (a dim, a dtype) come after that
# refusal: one native op split in two (max with a dim), composites that only call the kernel
KERNEL_CHECKS_AFTER = frozenset({"_max_dim", "_min_dim", "_median_dim", "_nanmedian_dim",
                                 "msort", "argsort", "norm", "nn.functional.logsigmoid"})


def _complex_input(inputs):
    return bool(inputs) and isinstance(inputs[0], Tensor) and inputs[0].dtype.is_complex


# ops whose kernel depends on the input: fft of a real signal is r2c
_BY_INPUT = {
    "fft.fft": lambda inputs: "_fft_c2c" if _complex_input(inputs) else "_fft_r2c",
    "fft.ifft": lambda inputs: "_fft_c2c" if _complex_input(inputs) else "fft.ifft",
}


def grad_refusal_kernel(op, inputs, params=()):
    """The name PyTorch's refusal of ``op``'s out= call with inputs requiring grad gives
    (``pow`` for ``square``), or None where it writes the result untracked or records."""
    name = op.name
    if name in _COPIES_WHEN:
        return _power_kernel(params)
    # (nonzero's: declared so; NOT_IMPLEMENTED_OUT's records a node write_out hangs)
    if name in _UNTRACKED or not op.differentiable or name in COPIED_OUT \
            or not_implemented_kernel(op, inputs, params) is not None:
        return None
    by_input = _BY_INPUT.get(name)
    if by_input is not None:
        return by_input(inputs)
    return _KERNELS.get(name, name.removeprefix("nn.functional."))


_SAFELY = "{name}: Expected {what} to be safely castable from {want} dtype, but got {what} " \
          "with dtype {got}"
_CAN_CAST = ("Expected canCast( typeMetaToScalarType(self.dtype()), typeMetaToScalarType("
             "out.dtype())) to be true, but got false.  (Could this error message be improved?"
             "  If so, please report an enhancement request to PyTorch.)")

# op -> (exception type, message) for a result that cannot be cast safely into out
_CASTS = {
    **{n: (RuntimeError, _SAFELY.format(name=t, what="result", want="{want}", got="{got}"))
       for n, t in (("linalg.tensorinv", "tensorinv"), ("linalg.tensorsolve", "tensorsolve"),
                    ("linalg.matrix_power", "matrix_power"), ("matrix_power", "matrix_power"),
                    ("linalg.cond", "linalg.cond"), ("linalg.pinv", "linalg.pinv"),
                    ("linalg.householder_product", "torch.linalg.householder_product"),
                    ("orgqr", "torch.linalg.householder_product"))},
    "linalg.eigvals": (RuntimeError, _SAFELY.format(
        name="torch.linalg.eigvals", what="eigenvalues", want="{want}", got="{got}")),
    "geqrf": (RuntimeError, _SAFELY.format(name="torch.geqrf", what="a", want="{want}",
                                           got="{got}")),
    **dict.fromkeys(("max", "min"), (RuntimeError, _CAN_CAST)),
    **dict.fromkeys(("cat", "stack"), (TypeError, "torch.cat(): input types can't be cast to "
                                                  "the desired output type {got}")),
    "inner": (RuntimeError, "tensordot: Expected the output tensor to have dtype {want}, but "
                            "got an output tensor with dtype {got}"),
    "addbmm": (RuntimeError, "self and mat2 must have the same dtype, but got {got} and {want}"),
    # (PyTorch's message names the input's dtype, then the result's, not out's)
    "mvlgamma": (RuntimeError, "mvlgamma: result type {input} can't be cast to the desired "
                               "output type {want}"),
}


# op -> (the name in PyTorch's message, what it calls each output) for the ops that name the
# output in their refusal ("solution" twice: PyTorch's lstsq names its residuals so)
_CAST_OUTPUTS = {
    "cholesky": ("cholesky", ("result",)), "cholesky_solve": ("cholesky_solve", ("result",)),
    "cholesky_inverse": ("cholesky_inverse", ("result",)),
    "linalg.eig": ("torch.linalg.eig", ("eigenvalues", "eigenvectors")),
    "linalg.lstsq": ("torch.linalg.lstsq", ("solution", "solution", "rank", "singular_values")),
}


def cast_refusal(op, want, got, index=0, inputs=()):
    """The error for ``op``'s result (its output ``index``) of dtype ``want`` that cannot be
    cast into an ``out=`` of dtype ``got`` (``inputs``: the op's, for messages naming the
    first one's dtype)."""
    named = _CAST_OUTPUTS.get(op.name)
    if named is not None:
        return RuntimeError(_SAFELY.format(name=named[0], what=named[1][index],
                                           want=want._torch_name, got=got._torch_name))
    kind, text = _CASTS.get(op.name, (RuntimeError, "result type {want} can't be cast to the "
                                                    "desired output type {got}"))
    first = getattr(inputs[0], "dtype", want) if inputs else want
    return kind(text.format(want=want._torch_name, got=got._torch_name,
                            input=first._torch_name))

