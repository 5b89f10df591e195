"""PyTorch's "barebones" unsigned dtypes: which ops refuse uint16, uint32 and uint64.

PyTorch 2.13 gives uint16/32/64 limited support: creation, copies, views, indexing, casts,
``eq``/``ne``, bitwise and/or/xor, ``mul``, sums and sorting work; most other CPU kernels have
no version for them and raise ``NotImplementedError('"add_stub" not implemented for
'UInt32'')``, naming the kernel. NumPy computes all of them, so ember refuses them here, from
one table, to keep programs that run on ember portable to PyTorch.

The table is keyed by registry name. An op with a dtype policy is refused when it computes in
a wide unsigned dtype (so ``uint32 + 2`` is refused while ``uint32 + 2.5``, computed in float32,
runs), in ``compute_dtype``, whose result is cached per operand signature: other dtypes pay
nothing. An op without a policy is refused when its first operand (a tensor) is wide unsigned
(see ``refuse_operands``, called by the dispatcher for these ops only). Entries are PyTorch's
kernel name, or a function of the operands giving it (None: that call is supported). Either
refusal is raised after the op's argument errors, which PyTorch checks before it picks a
kernel: the dispatcher checks that an elementwise op's operands broadcast (TensorIterator's
check) and runs the forward for the others (``Refused``), its value checks aside
(``KernelCheck``: an integer division by zero).
``tests/parity/unsigned_table_round33.py`` generates the table's specification from PyTorch.

Kernels chosen by a parameter's value are refused by their forwards, with ``refusal``: div's
rounding modes, pow's number exponent, flip's dims (of sizes above 1),
index_put's indices (a mask names masked_fill), a reduction's ``dtype=`` (``cast_input``),
count_nonzero over all dims. The logical ops, bitwise_not and the
shifts refuse in their own forwards and policies (ops/_promotion.py's refuse_logical and
refuse_kernel), as they did before this table.
"""

import numpy as np

from ember import _dtype as D

__all__ = ["REFUSED", "Refused", "KernelCheck", "refuse_compute", "refuse_operands", "refusal",
           "clamp_kernel", "WIDE_UNSIGNED_NP"]

WIDE_UNSIGNED_NP = frozenset(d.np for d in D.WIDE_UNSIGNED)


def _by_second_operand(number_kernel, tensor_kernel):
    """A kernel chosen by whether the second operand is a number (a Scalar overload)."""
    def kernel(operands):
        return number_kernel if len(operands) > 1 and operands[1][1] is D.SCALAR \
            else tensor_kernel
    return kernel


def _pow(operands):
    # a number exponent is checked by the forward: PyTorch's exponents 0 and 1 (fills and
    # copies) take no kernel
    return None if operands[1][1] is D.SCALAR else "pow"


# PyTorch skips some kernels for empty operands: a product with an empty factor (but dot), a
# gather or scatter at no index
def _product(kernel):
    return lambda arrays: None if arrays[0].size == 0 or arrays[1].size == 0 else kernel


def _unless_empty(kernel):
    return lambda arrays: None if arrays[0].size == 0 else kernel


def _matmul(arrays):
    a, b = arrays[0], arrays[1]
    if a.ndim == 1 and b.ndim == 1:
        return "dot"
    if a.size == 0 or b.size == 0:
        return None
    if a.ndim <= 2 and b.ndim <= 2:
        return "addmm_impl_cpu_" if b.ndim == 2 else "addmv_impl_cpu"
    return "bmm"


def _inner(arrays):
    a, b = arrays[0], arrays[1]
    if a.ndim == 0 or b.ndim == 0:
        return None                     # a product by a number: mul, which takes uint32
    return "dot" if a.ndim == 1 and b.ndim == 1 else "addmm_impl_cpu_"


# PyTorch checks an index's dtype before it picks the kernel (the forwards raise its errors)
_INT32_64 = frozenset(np.dtype(t) for t in (np.int32, np.int64))
_INT64 = frozenset((np.dtype(np.int64),))


def _indexed(kernel, valid=_INT32_64, empty=None):
    """A kernel taking an index (``arrays[1]``) of a dtype in ``valid``; ``empty``: the kernel
    for an empty index (None: PyTorch skips it)."""
    def choose(arrays):
        index = arrays[1]
        if getattr(index, "dtype", None) not in valid:
            return None
        return kernel if index.size else empty
    return choose


def _scatter(arrays):
    if getattr(arrays[1], "dtype", None) not in _INT32_64 or arrays[1].size == 0:
        return None
    return "scatter_gather_scalar_cpu" if len(arrays) < 3 or not hasattr(arrays[2], "ndim") \
        else "scatter_gather_tensor_cpu"


REFUSED = {
    # pointwise arithmetic and comparisons (PyTorch computes them in the promoted dtype)
    "add": "add_stub", "sub": "add_stub", "rsub": "add_stub", "diff": "add_stub",
    "floor_divide": "div_floor_cpu", "remainder": "remainder_cpu", "fmod": "fmod_cpu",
    "pow": _pow, "square": "pow", "neg": "neg_cpu", "abs": "abs_cpu",
    "sign": "sign_cpu", "sgn": "sign_cpu",
    "lt": "lt_cpu", "le": "le_cpu", "gt": "gt_cpu", "ge": "ge_cpu",
    "maximum": "maximum_cpu", "minimum": "minimum_cpu", "fmax": "maximum_cpu",
    "fmin": "minimum_cpu", "heaviside": "heaviside_cpu", "gcd": "gcd_cpu", "lcm": "lcm_cpu",
    "lerp": "lerp_kernel_scalar", "relu": "clamp_min_scalar_cpu",
    "clamp_min": _by_second_operand("clamp_min_scalar_cpu", "maximum_cpu"),
    "clamp_max": _by_second_operand("clamp_max_scalar_cpu", "minimum_cpu"),
    "isin": "isin_default_cpu", "searchsorted": "searchsorted_out_cpu",
    "bucketize": "searchsorted_out_cpu",
    # reductions and scans (sum, prod and cumsum compute in int64 unless asked for the dtype)
    "sum": "sum_cpu", "nansum": "sum_cpu", "prod": "prod_out_cpu", "cumsum": "cumsum_out_cpu",
    "cumprod": "cumprod_out_cpu", "min": "min_all", "max": "max_all", "_min_dim": "min_cpu",
    "_max_dim": "max_cpu", "amin": "min_values_cpu", "amax": "max_values_cpu",
    "aminmax": "aminmax_cpu", "argmin": "argmin_cpu", "argmax": "argmax_cpu",
    "topk": "topk_cpu", "kthvalue": "kthvalue_cpu", "median": "median_cpu",
    "nanmedian": "median_cpu", "_median_dim": "median_out", "_nanmedian_dim": "median_out",
    "mode": "mode_cpu", "cummax": "cummax_cpu", "cummin": "cummin_cpu", "trace": "trace",
    # ops without a dtype policy: refused for their first tensor operand's dtype
    "gather": _indexed("scatter_gather_tensor_cpu"), "scatter": _scatter,
    "scatter_add": _indexed("scatter_gather_tensor_cpu"),
    "scatter_reduce": _indexed("scatter_gather_tensor_cpu"),
    "index_select": _indexed("index_select", empty="index_select"),
    "index_add": _indexed("index_add_", empty="index_add_"),
    "index_copy": _indexed("index_copy_cpu", _INT64, "index_copy_cpu"),
    "index_fill": _indexed("index_fill_cpu", _INT64, "index_fill_cpu"),
    "index_reduce": _indexed("index_func_", _INT64, "index_func_"),
    "take": _indexed("take_cpu", _INT64), "put": _indexed("take_put_cpu", _INT64, "take_put_cpu"),
    "masked_select": "masked_select",     # (masked_fill: its forwards, after its checks)
    "masked_scatter": "masked_scatter", "tril": "tril", "triu": "triu",
    "dot": "dot", "vdot": "dot", "inner": _inner, "mm": _product("addmm_impl_cpu_"),
    "mv": _product("addmv_impl_cpu"), "bmm": _product("bmm"), "matmul": _matmul,
    "tensordot": "addmm_impl_cpu_", "addmm": "addmm_impl_cpu_",
    "addbmm": "addmm_impl_cpu_", "baddbmm": "baddbmm", "addmv": "addmv_impl_cpu",
    "addr": "addr_cpu", "addcmul": "addcmul_cpu_out", "threshold": "threshold_cpu",
    "pixel_shuffle": "pixel_shuffle", "pixel_unshuffle": "pixel_unshuffle",
    "channel_shuffle": "channel_shuffle", "nonzero_static": "nonzero_count_cpu",
    "nn.functional.linear": "addmm_impl_cpu_", "bincount": "bincount_cpu",
    "nonzero": "nonzero_count_cpu",
    "argwhere": "nonzero_count_cpu", "histc": "aminmax_cpu", "linalg.cross": "cross",
    "cross": "cross",
    # composites: the first kernel PyTorch's implementation reaches
    "trapezoid": _unless_empty("add_stub"), "cumulative_trapezoid": "add_stub",
    "linalg.multi_dot": "addmm_impl_cpu_",
    "chain_matmul": lambda arrays: None if len(arrays) == 1 else "addmm_impl_cpu_",
    "conv1d": "slow_conv2d_cpu", "conv2d": "slow_conv2d_cpu", "conv3d": "compute_columns3d",
    "conv_transpose1d": "slow_conv_transpose2d_out_cpu",
    "conv_transpose2d": "slow_conv_transpose2d_out_cpu",
    "conv_transpose3d": "slow_conv_transpose3d_out_cpu", "conv_tbc": "addmm_impl_cpu_",
    "max_pool1d_with_indices": "max_pool2d", "nn.functional.max_pool2d_with_indices":
    "max_pool2d", "nn.functional.max_pool3d_with_indices": "max_pool3d",
    "hash_tensor": _unless_empty("xor_sum_cpu"), "lu_unpack": "tril",
    "nn.functional.hardtanh": "clamp_scalar_cpu",
}

# ops with a dtype policy whose kernel depends on which operands are numbers, where the
# signature cannot tell (it skips None): a function of the operands' arrays
BY_ARRAYS = {"clamp": lambda arrays: clamp_kernel(arrays[1], arrays[2])}
REFUSED.update(dict.fromkeys(BY_ARRAYS, "clamp_cpu"))


def clamp_kernel(lo, hi):
    """The kernel PyTorch's clamp runs for bounds ``lo`` and ``hi`` (as the dispatcher reads
    them, before it casts numbers: numbers, arrays of any dims, or None). Its Tensor overload
    takes tensor bounds only: a number beside a 0-dim tensor picks the Scalar one."""
    if (hasattr(lo, "ndim") or hasattr(hi, "ndim")) and \
            (lo is None or hasattr(lo, "ndim")) and (hi is None or hasattr(hi, "ndim")):
        return "clamp_cpu" if lo is not None and hi is not None else \
            "maximum_cpu" if lo is not None else "minimum_cpu"
    return "clamp_scalar_cpu" if lo is not None and hi is not None else \
        "clamp_min_scalar_cpu" if lo is not None else "clamp_max_scalar_cpu"


def refusal(kernel, dtype):
    """PyTorch's error for CPU kernel ``kernel`` given ``dtype``, which it has no version for."""
    return NotImplementedError(f"\"{kernel}\" not implemented for '{dtype._torch_name}'")


def refuse_compute(name, compute, operands):
    """Raise PyTorch's error if op ``name`` has no kernel computing in ``compute`` (a wide
    unsigned dtype) for ``operands`` ((dtype, kind) pairs, as promotion reads them)."""
    name = name.rstrip("_") if name.endswith("_") else name
    kernel = REFUSED.get(name)
    if kernel is not None and type(kernel) is not str:
        kernel = kernel(operands)
    if kernel is not None:
        raise Refused(str(refusal(kernel, compute)), None, None, BY_ARRAYS.get(name), compute)


# ops whose forwards check values (indices in range, ...), which PyTorch does in the kernel
# it refuses: refused before the forward runs
_VALUES_CHECKED = frozenset({
    "gather", "scatter", "scatter_add", "scatter_reduce", "index_select", "index_add",
    "index_copy", "index_fill", "index_reduce", "take", "put", "bincount", "histc"})


class Refused(NotImplementedError):
    """PyTorch's refusal of an op's operands, raised before its forward ran: ``xp`` (None for
    the ops in _VALUES_CHECKED) and ``arrays`` let the dispatcher run the forward first for its
    argument errors, which PyTorch raises before it picks a kernel (``ember.mm(u, v)`` of
    mismatched shapes, ``u + v`` of ones that do not broadcast). A refusal by a dtype policy
    (``refuse_compute``) gets them from the dispatcher (``at``); ``by_params``, if given, maps
    the message and the call's other arguments to the message naming the kernel they pick."""

    def __init__(self, message, xp, arrays, by_arrays=None, dtype=None, by_params=None):
        super().__init__(message)
        self.xp, self.arrays, self.by_arrays, self.dtype = xp, arrays, by_arrays, dtype
        self.by_params = by_params

    def at(self, xp, arrays):
        """This refusal, for operands ``arrays`` (numbers not yet cast) on ``xp``."""
        if self.by_arrays is not None:
            self.args = (str(refusal(self.by_arrays(arrays), self.dtype)),)
        self.xp, self.arrays = xp, arrays
        return self


class KernelCheck(RuntimeError):
    """An error PyTorch's kernel raises for operand values (an integer division by zero),
    after it picked the kernel: a refusal of the operands' dtype comes first."""

    def __reduce__(self):               # (pickled as the plain RuntimeError it shows as)
        return RuntimeError, self.args


# tracebacks show PyTorch's plain "RuntimeError: ..."
KernelCheck.__name__ = KernelCheck.__qualname__ = "RuntimeError"
KernelCheck.__module__ = "builtins"


def refuse_operands(op, xp, arrays):
    """Raise PyTorch's error (``Refused``) for op ``op`` (one without a dtype policy, listed
    in REFUSED), whose first operand, ``arrays[0]``, is wide unsigned (the dispatcher tests
    that)."""
    kernel = op.unsigned_kernel
    if type(kernel) is not str:
        kernel = kernel(arrays)
    if kernel is not None:
        raise Refused(str(refusal(kernel, D.FROM_NUMPY[arrays[0].dtype])),
                      None if op.name in _VALUES_CHECKED else xp, arrays)
