"""Reductions and scans that compute in the dtype of their ``out=`` tensor.

PyTorch's ``sum(x, out=o)`` sums as if ``dtype=o.dtype`` had been passed: into an int64
``out`` it sums the truncated elements, into a float64 one it sums in float64. ``std``,
``var`` and ``logsumexp``, which take no ``dtype=``, reduce the input cast to out's floating
dtype. Each entry of ``OUT_PREPARE`` is called by the op's generated function, only when
``out`` is given, as ``prepare(input, dtype, out)`` and returns the ``(input, dtype)`` to run
with (``dtype`` is None for ops without that parameter), or raises PyTorch's error for the
combination; one marked ``all_inputs`` gets the tuple of all the op's inputs as ``input``,
and one marked ``with_params`` the inputs and the parameters (and only checks them).
The ops whose ``out=`` must simply have the result's dtype are in _out_dtypes.
While a torch function mode or a subclass overrides the call, nothing is changed: the
override sees the call as made, and the call it makes in turn is prepared.
"""

from ember import _dtype as D
from ember._tensor import Tensor
from ember.ops._out_dtypes import _C_NAMES, MESSAGES
from ember.overrides._protocol import has_torch_function

_EXPECTED = "Expected out tensor to have dtype {}, but got {} instead"
_NANSUM = "nansum: provided dtype must match dtype of result. Got {} and {}."


def _floating(d):
    return d.category == D.FLOATING


def _inexact(d):
    return d.category >= D.FLOATING


def _c_name(d):
    return _C_NAMES.get(d, d.name)


def _not_implemented(kernel, d):
    return NotImplementedError(f"\"{kernel}\" not implemented for '{d._torch_name}'")


def _same_dtype(dtype, got):
    if dtype is not None and dtype is not got:
        raise RuntimeError(_EXPECTED.format(_c_name(dtype), _c_name(got)))


def _adopt(x, dtype, out):
    # sum, prod, cumsum, cumprod: out's dtype is the dtype= argument
    if not isinstance(out, Tensor):
        return x, dtype
    _same_dtype(dtype, out.dtype)
    return x, out.dtype


def _mean(x, dtype, out):
    if not isinstance(out, Tensor) or not isinstance(x, Tensor):
        return x, dtype
    got = out.dtype
    if dtype is not None and not _inexact(dtype):
        return x, dtype                 # mean's own error for an integral dtype=
    _same_dtype(dtype, got)
    if dtype is not None or not _inexact(x.dtype):
        return x, dtype                 # mean's own error for integral input
    if not _inexact(got):
        # PyTorch sums into out, then divides it in place
        raise RuntimeError(f"result type Float can't be cast to the desired output type "
                           f"{got._torch_name}")
    return x, got


def _nan_reduction(integral_error):
    def prepare(x, dtype, out):
        if not isinstance(out, Tensor) or not isinstance(x, Tensor):
            return x, dtype
        got = out.dtype
        if dtype is not None:
            if integral_error is not None and not _inexact(dtype):
                return x, dtype         # nanmean's own error for an integral dtype=
            if not _inexact(dtype):
                return _adopt(x, dtype, out)    # nansum of integers is a sum
            if dtype is not got:
                raise RuntimeError(_NANSUM.format(got._torch_name, dtype._torch_name))
            return x, dtype
        if x.dtype.is_complex:
            return x, dtype             # the op's own error
        if not _floating(x.dtype):
            if integral_error is not None:
                raise RuntimeError(integral_error)
            return x, got
        if not _floating(got):
            raise _not_implemented("nansum_cpu", got)
        return x, got
    return prepare


def _std_var(x, dtype, out):
    # the floating input cast to out's floating dtype; a complex out is not implemented
    if not isinstance(out, Tensor) or not isinstance(x, Tensor) or not _floating(x.dtype):
        return x, dtype
    got = out.dtype
    if got.is_complex:
        raise _not_implemented("std_cpu", got)
    if _floating(got) and got is not x.dtype:
        return x.to(got), dtype
    return x, dtype


def _logsumexp(x, dtype, out):
    # the input is reduced in a floating out's dtype, unless that is narrower than the
    # input's own floating dtype (the result is then rounded after)
    if isinstance(out, Tensor) and isinstance(x, Tensor) and not x.dtype.is_complex:
        got = out.dtype
        if _floating(got) and (not _floating(x.dtype) or got.itemsize > x.dtype.itemsize):
            return x.to(got), dtype
    return x, dtype


def _exact(x, dtype, out):
    # softmax, log_softmax: out's dtype is checked before the kernel runs
    if isinstance(out, Tensor) and isinstance(x, Tensor):
        want = x.dtype if dtype is None else dtype
        _same_dtype(want, out.dtype)
    return x, dtype


def _tensor_operands(operands, dtype, out):
    # where: only its all-tensor signature takes out= (PyTorch's parser refuses a number
    # there, or a lone condition, before anything runs)
    if not all(isinstance(v, Tensor) for v in operands):
        from ember.ops._overloads import refine_type_error
        error = TypeError("where(): out= takes a tensor condition, input and other")
        refine_type_error(error, "where", "function", "where")
        raise error
    return operands, dtype


_tensor_operands.all_inputs = True     # called with all the op's inputs, not the first's


def _quantile(inputs, params, out):
    # quantile, nanquantile: PyTorch checks out's dtype after the input's and q's, before the
    # dim and q's values (ops/quantiles.py)
    from ember.ops.quantiles import check_before_out
    x, q = inputs
    if isinstance(x, Tensor) and isinstance(out, Tensor):
        check_before_out(x._data, q._data if isinstance(q, Tensor) else q, params[2])
        if out.dtype is not x.dtype:
            raise RuntimeError(MESSAGES["quantile"])


_quantile.with_params = True    # called with all the op's inputs and its parameters


def _unless_overridden(prepare):
    if getattr(prepare, "with_params", False):
        def run(inputs, params, out):
            if not has_torch_function((*inputs, out)):
                prepare(inputs, params, out)
        run.with_params = True
        return run
    if getattr(prepare, "all_inputs", False):
        def run(x, dtype, out):
            if has_torch_function((*x, out)):
                return x, dtype
            return prepare(x, dtype, out)
        run.all_inputs = True
        return run

    def run(x, dtype, out):
        if has_torch_function((x, out)):
            return x, dtype
        return prepare(x, dtype, out)
    return run


_PREPARE = {
    **dict.fromkeys(("sum", "prod", "cumsum", "cumprod"), _adopt),
    "mean": _mean,
    "nansum": _nan_reduction(None),
    "nanmean": _nan_reduction("nanmean(): integral types and 'Bool' are not supported for "
                              "nanmean, even for empty tensors."),
    **dict.fromkeys(("std", "var"), _std_var),
    "logsumexp": _logsumexp,
    **dict.fromkeys(("softmax", "log_softmax"), _exact),
    "where": _tensor_operands,
    **dict.fromkeys(("quantile", "nanquantile"), _quantile),
}
OUT_PREPARE = {name: _unless_overridden(f) for name, f in _PREPARE.items()}
