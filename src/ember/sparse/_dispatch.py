"""The ``__torch_function__`` table of sparse tensors: which function runs each ember op that
meets a sparse operand (see NOTE [Sparse tensors] in _tensor.py)."""

import numbers

from ember._tensor import Tensor
from ember._values_backed import op_name, registrar
from ember.sparse import _layouts as L
from ember.sparse._tensor import SparseTensor

__all__ = ["HANDLERS", "ANY_LAYOUT", "BATCHED", "handles", "dispatch", "op_name", "backend_name",
           "aten_name", "is_sparse", "is_scalar"]

HANDLERS = {}
handles = registrar(HANDLERS)   # @handles(*names): the function running those ops


def _sparse_operands(args):
    for a in args:
        for x in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(x, SparseTensor):
                yield x


def backend_name(args):
    """PyTorch's name of the backend of the first sparse tensor among ``args``."""
    for x in _sparse_operands(args):
        kind = "Sparse" if x.layout is L.sparse_coo else "SparseCsr"
        return kind + ("CUDA" if x.device.type == "cuda" else "CPU")
    return "SparseCPU"


# the handlers written for every layout (and, added by _ops.py, the ops on the values alone);
# the others know only COO and CSR tensors
ANY_LAYOUT = {"to_dense", "_to_copy", "transpose", "t", "mm", "spmm", "matmul", "addmm", "mv",
              "mul", "div", "mul_", "div_", "fill_", "add", "sub", "sum", "add_", "select",
              "zeros_like", "empty_like", "permute", "__get__", "__set__"}


def aten_name(name):
    """PyTorch's operator name for the registry name ``name``: linalg and special functions
    keep their namespace as a prefix (``linalg_vector_norm``), functional ones drop it."""
    namespace, _, bare = name.rpartition(".")
    return f"{namespace}_{bare}" if namespace in ("linalg", "special") else bare


def _handles_layouts(name, args):
    return name in ANY_LAYOUT or all(x.layout is L.sparse_coo or x.layout is L.sparse_csr
                                      for x in _sparse_operands(args))


# what runs on batched compressed tensors (see _batched.py): the ops on their values alone
# (added by _ops.py) and these
BATCHED = {"to_dense", "_to_copy", "__get__", "__set__", "select", "matmul", "mm", "spmm"}


def _refuse_batched(name, args):
    if name not in BATCHED:
        refuse_batched(name, args)


def refuse_batched(name, args):
    """ember's error for op ``name`` given a batched compressed tensor among ``args``."""
    if any(x._crow is not None and x._crow.ndim > 1 for x in _sparse_operands(args)):
        raise NotImplementedError(f"Could not run 'aten::{aten_name(name)}' with "
                                  f"arguments from the '{backend_name(args)}' backend: ember "
                                  f"does not support this operator on batched compressed "
                                  f"sparse tensors (convert with .to_dense() first).")


# pointwise ops PyTorch has no compressed kernel for, which it refuses with a RuntimeError
_POINTWISE = frozenset((
    "exp", "exp2", "cos", "cosh", "sigmoid", "log", "log2", "log10", "clamp", "clamp_min",
    "clamp_max", "eq", "ne", "lt", "le", "gt", "ge", "acos", "acosh", "reciprocal", "rsqrt",
    "erfc", "lgamma", "digamma", "bitwise_not", "sub_", "where", "maximum", "minimum", "atan2",
    "hypot", "fmod", "remainder", "pow_", "clamp_"))


def _refuse_pointwise(name, args):
    if name in _POINTWISE:
        for x in _sparse_operands(args):
            if x.layout is not L.sparse_coo:
                raise RuntimeError(f"unsupported tensor layout: {L.short_name(x.layout)}")


def dispatch(func, args, kwargs):
    """Run ember function ``func`` on arguments among which is a sparse tensor."""
    name = op_name(func)
    _refuse_batched(name, args)
    handler = HANDLERS.get(name)
    if handler is None or not _handles_layouts(name, args):
        if name in ("__get__", "__set__"):      # a mode's property access
            return func(*args, **kwargs)
        _refuse_pointwise(name, args)
        raise NotImplementedError(
            f"Could not run 'aten::{aten_name(name)}' with arguments from the "
            f"'{backend_name(args)}' backend: ember does not support this operator on sparse "
            f"tensors (convert with .to_dense() first).")
    return handler(*args, **kwargs)


def is_sparse(x):
    """Whether ``x`` is a sparse tensor."""
    return isinstance(x, SparseTensor)


def is_scalar(x):
    """Whether ``x`` acts as a scalar: a Python number or a 0-dim strided tensor."""
    return isinstance(x, numbers.Number) or (isinstance(x, Tensor) and not is_sparse(x)
                                             and x.ndim == 0)
