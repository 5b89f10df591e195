"""Which ops refuse an ``out=`` tensor of another dtype than their result's.

Most PyTorch ops cast their result into ``out`` when the cast is safe (``add`` into a
float64 ``out`` from float32 operands). About seventy do not: their kernels check that
``out`` has exactly the result's dtype, each with its own wording. A few (``clamp``,
``lerp``, ``diff``, ``inner``, ``matrix_power``, ``addbmm``) check on some paths only, by
operand kind or size; those are left accepting, as on their other paths. Which ops check is
a fact of PyTorch's kernels, not of the ops' math, so it is kept here, in one table, rather
than on each op's registration; ``install`` marks the ops and ``_out.write_out``
raises. ``_CHECKS`` holds the ops whose check is of a kind of dtype, or depends on the
operands: each is called with out's dtype, the result's and the operands, and returns True
to accept ``out`` whatever the cast.
"""

from ember import _dtype as D
from ember._tensor import Tensor

# the C++ type names PyTorch's "Expected out tensor to have dtype ..." message prints
_C_NAMES = {
    D.float16: "c10::Half", D.bfloat16: "c10::BFloat16", D.float32: "float",
    D.float64: "double", D.complex64: "c10::complex<float>",
    D.complex128: "c10::complex<double>", D.int64: "long int", D.int32: "int",
    D.int16: "short int", D.int8: "signed char", D.uint8: "unsigned char", D.bool_: "bool",
}

_EXPECTED = "Expected out tensor to have dtype {want_c}, but got {got_c} instead"
_FOUND = "Found dtype {got} but expected {want}"
_RESULT_DTYPE = "result dtype {got} does not match input dtype {want}"
_SAME_SCALAR_TYPE = "{name}(): self and result must have the same scalar type"
_TENSORDOT = ("tensordot: Expected the output tensor to have dtype {want}, but got an output "
              "tensor with dtype {got}")
_REDUCED = ("Expected the dtype for input and out to match, but got {want} for input's dtype "
            "and {got} for out's dtype.")
_HISTOGRAM = ("torch.histogram: input tensor and hist tensor should have the same dtype, but "
              "got input {want_c} and hist {got_c}")
_NORM = "{name} expected out tensor dtype {want} but got: {got}"

MESSAGES = {
    **dict.fromkeys(
        ("cross", "renorm", "linalg.inv", "inverse", "linalg.solve", "linalg.lu_solve",
         "linalg.det", "linalg.slogdet", "slogdet", "linalg.cross", "linalg.vector_norm",
         "linalg.svdvals", "index_add", "index_reduce", "index_copy", "mm", "bmm", "mv",
         "linalg.ldl_solve", "softmax", "log_softmax", "aminmax", "addmm", "baddbmm", "addmv",
         "norm", "gather", "scatter", "scatter_add", "scatter_reduce", "take_along_dim",
         "diag", "tril", "triu", "msort", "linalg.cholesky", "linalg.cholesky_ex",
         "linalg.qr", "linalg.eigh", "linalg.eigvalsh", "linalg.svd", "linalg.lu",
         "linalg.inv_ex", "linalg.solve_ex", "linalg.lu_factor", "linalg.lu_factor_ex",
         "nn.functional.linear", "nn.functional.avg_pool2d", "nn.functional.avg_pool3d",
         "linalg.ldl_factor", "linalg.ldl_factor_ex", "_max_dim", "svd",
         "_min_dim", "sort", "argsort", "topk", "argmax", "argmin", "isin", "slice_scatter"),
        _EXPECTED),
    **dict.fromkeys(
        ("hardshrink", "nn.functional.softshrink", "nn.functional.gelu",
         "nn.functional.softplus", "neg", "sign", "sgn", "frac", "floor", "ceil", "trunc",
         "round", "conj_physical", "bitwise_not"),
        _FOUND),
    "nan_to_num": "nan_to_num: dtype of out: {got} should be same as input: {want}",
    "float_power": ("the output given to float_power has dtype {got} but the operation's "
                    "result requires dtype {want}"),
    **dict.fromkeys(("vdot", "dot"), _RESULT_DTYPE),
    **dict.fromkeys(("index_select", "masked_select"), _SAME_SCALAR_TYPE),
    "tensordot": _TENSORDOT,
    **dict.fromkeys(("amax", "amin"), _REDUCED),
    **dict.fromkeys(("histc", "histogram"), _HISTOGRAM),
    **dict.fromkeys(("linalg.norm", "linalg.matrix_norm"), _NORM),
    "where": "Expected out type to be {want} but got {got}",
    "linalg.vecdot": "linalg.vecdot: Expected out of dtype{want} but found {got}",
    "linalg.multi_dot": "multi_dot(): expected out tensor to have dtype {want_c} but got {got_c}",
    **dict.fromkeys(("linalg.solve_triangular", "nn.functional.logsigmoid"),
                    "expected scalar type {want} but found {got}"),
    **dict.fromkeys(("logcumsumexp", "cummax", "cummin"),
                    "expected scalar_type {want} but found {got}"),
    **dict.fromkeys(("_median_dim", "_nanmedian_dim"),
                    "Expected tensor for 'values' to have the same type as tensor for argument "
                    "#2 'self'; but type torch.{got}Tensor does not equal torch.{want}Tensor "
                    "(while checking arguments for median)"),
    "heaviside": "heaviside is not yet implemented for tensors with different dtypes.",
    **dict.fromkeys(("complex", "polar"),
                    "Expected object of scalar type {want} but got scalar type {got} for "
                    "argument 'out'"),
    "ormqr": ("torch.ormqr: Expected input and result to have the same dtype, but input has "
              "dtype{want} and result has dtype {got}"),
    # (two outputs: a message for each)
    "kthvalue": ("output values must be of same type as input",
                 "output indices must be of scalar type Long"),
    "mode": ("expected scalar type '{want}' but got '{got}' for values output",
             "expected scalar type '{want}' but got '{got}' for indices output"),
    "frexp": "torch.frexp() expects mantissa to have dtype {want_c} but got {got_c}",
    "chain_matmul": "multi_dot(): expected out tensor to have dtype {want_c} but got {got_c}",
    "take": ("take(): self and out expected to have the same dtype, but got self.dtype = {want} "
             "and out.dtype = {got}"),
    **dict.fromkeys(("quantile", "nanquantile"),
                    "quantile() out tensor must be same dtype as the input tensor"),
    **dict.fromkeys(("nonzero", "nonzero_static"),
                    "{name}: Expected out tensor to have scalar type {want} but got scalar "
                    "type{got}"),
    **dict.fromkeys(("isposinf", "isneginf", "signbit"),
                    "{name} does not support non-boolean outputs."),
}


# ops whose out= must be of a kind (complex, or real floating) rather than of the result's
# dtype: the FFTs; the 2-D ones name their N-D kernels, ifft2 and ifftn that of fftn
_FFT_KINDS = {
    **{n: ("complex", n.replace("2", "n").replace("ifftn", "fftn"))
       for n in ("fft", "ifft", "rfft", "ihfft", "fft2", "ifft2", "rfft2", "ihfft2", "fftn",
                 "ifftn", "rfftn", "ihfftn")},
    **{n: ("floating point", n.replace("2", "n"))
       for n in ("irfft", "hfft", "irfft2", "hfft2", "irfftn", "hfftn")},
}


def _kind_check(kind, kernel):
    def check(got, want, inputs):
        ok = got.is_complex if kind == "complex" else got.category == D.FLOATING
        if not ok:
            raise RuntimeError(f"{kernel} expects a {kind} output tensor, but got "
                               f"{got._torch_name}")
    return check


def _logical_check(name):
    # all/any write bool, or uint8 (whatever their result's dtype), into nothing else
    def check(got, want, inputs):
        if got is not D.bool_ and got is not D.uint8:
            raise RuntimeError(f"{name} only supports bool tensor for result, got: "
                               f"{got._torch_name}")
        return True
    return check


def _logsumexp_check(got, want, inputs):
    if got.category != D.FLOATING and not got.is_complex:
        raise RuntimeError(f"logsumexp(): Expected floating point type for result tensor, but "
                           f"got: {got._torch_name}")


def _abs_check(got, want, inputs):
    # abs of a complex tensor casts its real result into a real out (a complex out: of the
    # input's dtype, computed complex to complex); of a real one, demands its dtype
    x = inputs[0].dtype
    if x.is_complex:
        if got.is_complex and got is not x:
            raise RuntimeError(_FOUND.format(got=got._torch_name, want=x._torch_name))
    elif got is not want:
        raise RuntimeError(_FOUND.format(got=got._torch_name, want=want._torch_name))


def check_kept_out(op, flat, out):
    """PyTorch's error for an ``out=`` tensor of another dtype than the input's, from the ops
    that keep their input's dtype and check ``out`` before they refuse that dtype (the
    dispatcher calls it then: ``neg(uint32 tensor, out=float32 tensor)``)."""
    x = flat[0] if flat else None
    if type(op.out_dtype_error) is tuple and isinstance(out, (tuple, list)) \
            and isinstance(x, Tensor):          # (values, indices: kthvalue, mode)
        for i, (o, want) in enumerate(zip(out, (x.dtype, D.int64))):
            if isinstance(o, Tensor) and o.dtype is not want:
                raise RuntimeError(message(op, want, o.dtype, i))
        return
    if not isinstance(out, Tensor) or not isinstance(x, Tensor) or out.dtype is x.dtype:
        return
    if op.out_dtype_check is _abs_check:
        _abs_check(out.dtype, x.dtype, flat)
    elif op.out_dtype_error == _FOUND:
        raise RuntimeError(_FOUND.format(got=out.dtype._torch_name, want=x.dtype._torch_name))


def _search_check(got, want, inputs):
    # searchsorted/bucketize write exactly int32 (out_int32=True) or int64
    if got is not want:
        raise RuntimeError(f"torch.searchsorted(): output tensor's dtype is wrong, it can only "
                           f"be Int(int32) or Long(int64) depending on whether out_int32 flag "
                           f"is True, but we got output tensor's dtype {got._torch_name} and "
                           f"out_int32 flag is {want is D.int32}")


def _clamp_check(got, want, inputs):
    # clamp with number bounds demands its result's dtype; with tensor bounds it casts
    if got is not want and not any(isinstance(b, Tensor) for b in inputs[1:]):
        raise RuntimeError(_FOUND.format(got=got._torch_name, want=want._torch_name))


def _ldexp_check(got, want, inputs):
    # (a floating result into an integral out; complex into real has the common wording)
    if not (got.is_floating_point or got.is_complex):
        raise RuntimeError(f"ldexp can't be cast to the desired output type {got._torch_name}")


def _diag_check(got, want, inputs):
    # a vector's diag (a matrix) is refused an unsafe cast first, in words of its own
    if inputs[0].ndim == 1 and not D.can_cast(want, got):
        raise RuntimeError(f"diag: result type {want._torch_name} can't be cast to the "
                           f"desired out= type {got._torch_name}")


def _matmul_check(got, want, inputs):
    # exact dtypes, worded by the kernel: dot for two vectors, addmv for a batch of matrices
    # by a vector where the batch folds into one matrix, mm/mv/bmm otherwise
    if got is not want:
        a, b = inputs
        text = _RESULT_DTYPE if a.ndim == b.ndim == 1 else \
            _ADDMV if a.ndim > 2 and b.ndim == 1 and _folds(a) else _EXPECTED
        raise RuntimeError(_format(text, want, got))


def _folds(t):
    """Whether matmul views the batch of matrices ``t`` as one matrix (no copy needed)."""
    shape, strides = t.shape, t.stride()
    return t.numel() == 0 or all(strides[i] == strides[i + 1] * shape[i + 1]
                                 for i in range(t.ndim - 1))


_ADDMV = "addmv input tensors must have the same dtype, but got {got}, {want}, and {want}"


def _conj_physical_check(got, want, inputs):
    # its out= variant runs the conj kernel, which has no float8 or uint16/32/64 version (the
    # function and conj_physical_ copy or keep a real tensor): refused after the dtype check
    if got is want and (want in D.FLOAT8 or want in D.WIDE_UNSIGNED):
        raise NotImplementedError(f"\"conj_cpu\" not implemented for '{want._torch_name}'")


_CHECKS = {"all": _logical_check("all"), "any": _logical_check("any"),
           "diag": _diag_check, "matmul": _matmul_check,
           "logsumexp": _logsumexp_check, "abs": _abs_check,
           "searchsorted": _search_check, "bucketize": _search_check,
           **dict.fromkeys(("clamp", "clamp_min", "clamp_max"), _clamp_check),
           "ldexp": _ldexp_check, "conj_physical": _conj_physical_check}


def message(op, want, got, index=0):
    """The error ``op`` raises for its ``index``-th ``out=`` tensor, of dtype ``got``, where
    its result has dtype ``want``."""
    text = op.out_dtype_error
    return _format(text[index] if type(text) is tuple else text, want, got, op.name)


def _format(text, want, got, name=None):
    return text.format(name=name, want=want._torch_name, got=got._torch_name,
                       want_c=_C_NAMES.get(want, want.name), got_c=_C_NAMES.get(got, got.name))


def install(registry):
    """Mark the ops of ``MESSAGES`` in ``registry`` (name -> Op) as demanding exact dtypes."""
    for name, text in MESSAGES.items():
        registry[name].out_dtype_error = text
    for name, (kind, kernel) in _FFT_KINDS.items():
        registry[f"fft.{name}"].out_dtype_check = _kind_check(kind, kernel)
    for name, check in _CHECKS.items():
        registry[name].out_dtype_check = check
