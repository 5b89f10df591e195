"""``torch.sparse``: sparse COO and compressed (CSR, CSC, BSR, BSC) tensors and the functions
made for them.

``ember.sparse_coo_tensor(indices, values, size)`` and ``ember.sparse_csr_tensor(crow, col,
values, size)`` make sparse tensors (``x.to_sparse()`` and ``x.to_sparse_csr()`` convert dense
ones); ``ember.sparse.mm(adj, x)`` (also ``ember.mm``, ``ember.spmm``, ``adj @ x``) multiplies
a sparse matrix by a dense one, differentiably in both. See NOTE [Sparse tensors] in
_tensor.py for how they are built.
"""

from ember import _legacy_types
from ember.sparse import _layouts as _L
from ember.sparse._tensor import SparseTensor, sparse_coo_tensor
from ember.sparse._compressed import sparse_compressed_tensor, sparse_csr_tensor
from ember.sparse._invariants import check_sparse_tensor_invariants
from ember.sparse import _convert  # noqa: F401  (gives Tensor its to_sparse* methods)
from ember.sparse._ops import log_softmax, softmax, sum  # noqa: A004
from ember.sparse import _inplace  # noqa: F401  (the in-place handlers)
from ember.sparse import _join  # noqa: F401  (the cat/stack handlers)
from ember.sparse import _norm  # noqa: F401  (the norm handler)
from ember.sparse._mm_reduce import mm_reduce as _mm_reduce
from ember.sparse._products import addmm as _addmm
from ember.sparse._products import mm as _mm
from ember.sparse._products import sampled_addmm
from ember.sparse._spdiags import spdiags

__all__ = ["mm", "addmm", "sampled_addmm", "spdiags", "sum", "softmax", "log_softmax", "spmm",
           "sparse_coo_tensor", "sparse_csr_tensor", "sparse_compressed_tensor",
           "check_sparse_tensor_invariants",
           "SparseTensor", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor",
           "LongTensor", "IntTensor", "ShortTensor", "CharTensor", "ByteTensor"]


def mm(mat1, mat2, reduce=None):
    """``mat1 @ mat2`` where ``mat1`` (or ``mat2``) is a sparse COO or CSR matrix; the
    gradient of a sparse leaf ``mat1`` is sparse, with ``mat1``'s indices. With ``reduce``
    ("sum", "mean", "amax", "amin"), a CSR ``mat1``'s products of each row are reduced so."""
    _as_vmap_fallback("aten::_sparse_mm" + ("" if reduce is None else ".reduce"), mat1, mat2)
    if reduce is not None:
        return _mm_reduce(mat1, mat2, reduce)
    _refuse_mixed_layouts(mat1, mat2)
    return _mm(mat1, mat2, dense_grad=False)


def _refuse_mixed_layouts(mat1, mat2):
    """PyTorch's errors for two sparse matrices of layouts its ``sparse.mm`` has no kernel
    for: it adds the product to zeros in ``mat2``'s layout (no block layout there)."""
    from ember.sparse._products import _layout_name
    if not (type(mat1) is SparseTensor and type(mat2) is SparseTensor):
        return
    a, b = mat1.layout, mat2.layout
    if a is _L.sparse_coo and b is _L.sparse_coo:
        return
    if _L.blocked(b):
        raise RuntimeError(f"zeros_sparse_compressed expected sparse compressed (non-block) "
                           f"tensor layout but got {_layout_name(mat2)}")
    if _L.sparse_coo in (a, b) or _L.blocked(a) or (a is _L.sparse_csr and b is _L.sparse_csc):
        raise RuntimeError(f"addmm: computation on CPU is not implemented for "
                           f"{_layout_name(mat2)} + {_layout_name(mat1)} @ "
                           f"{_layout_name(mat2)}")


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """``beta * mat + alpha * (mat1 @ mat2)`` for a sparse ``mat1``; the gradient of a sparse
    leaf ``mat1`` is sparse, with its indices (as ``sparse.mm``)."""
    _as_vmap_fallback("aten::_sparse_addmm", mat, mat1, mat2)
    return _addmm(mat, mat1, mat2, beta=beta, alpha=alpha)


def _as_vmap_fallback(aten, *operands):
    """PyTorch runs sparse.mm and sparse.addmm under vmap through its per-example fallback
    (ember batches the product at once): its warnings, one per call it makes, and its refusal
    of a batch of size 0."""
    from ember.func._batched import STATE, BatchedTensor, level_size
    if not STATE.levels:
        return
    levels = set()
    for x in operands:
        while type(x) is BatchedTensor:
            levels.add(x._level)
            x = x._value
    calls, size = 0, None
    for level in sorted(levels):            # the fallback takes the highest level first
        size = level_size(level)
        calls = 1 + size * calls
    if not calls:
        return
    from ember.func._batching import warn_fallback
    for _ in range(calls if size else 1):
        warn_fallback(aten)
    if not size:
        raise RuntimeError(f"Batching rule not implemented for {aten}. The fallback path does "
                           f"not support vmap over dims of size 0.")


def spmm(input, mat2):
    """``torch.spmm``: ``torch.mm`` under another name (a sparse leaf gets a dense gradient),
    offered to ``__torch_function__`` as ``mm``, as PyTorch offers it."""
    import ember
    return ember.mm(input, mat2)


def _legacy_deprecated(form, instead):
    from ember._warn import warn_once
    warn_once(f"torch.sparse.SparseTensor({form}) is deprecated.  Please use "
              f"torch.sparse_coo_tensor({instead}).")


def _check_legacy_indices(indices, sized):
    """PyTorch's legacy constructors take int64 indices only (no conversion)."""
    import ember
    if indices.dtype is ember.int64:
        return
    if sized:
        raise RuntimeError("indices must be an int64 tensor")
    if indices.dtype is ember.bool:
        raise RuntimeError("result type Long can't be cast to the desired output type Bool")
    raise RuntimeError(f"expected scalar type Long but found {indices.dtype._torch_name}")


def legacy_sparse_new(args, dtype, device):
    """``ember.sparse.FloatTensor(indices, values[, size])`` or ``(*sizes)`` (the legacy sparse
    types' constructor, ember._legacy_types): a COO tensor of ``dtype``."""
    import ember
    if args and isinstance(args[0], ember.Tensor):         # (indices, values[, size])
        if len(args) == 3:
            _legacy_deprecated("indices, values, shape, *, device=",
                               "indices, values, shape, dtype=, device=")
        else:
            _legacy_deprecated("indices, values, *, device=", "indices, values, dtype=, "
                               "device=")
        _check_legacy_indices(args[0], len(args) == 3)
        return sparse_coo_tensor(*args, device=device, check_invariants=True)
    if not args:
        _legacy_deprecated("", "(0,), dtype=")
        args = (0,)
    else:
        if len(args) == 1 and isinstance(args[0], (tuple, list)):
            if not isinstance(args[0], ember.Size):
                raise TypeError("ember.sparse.SparseTensor(sequence) only accepts sizes.  "
                                "Please use ember.sparse_coo_tensor() or construct a "
                                "strided tensor and convert it to sparse via to_sparse.")
            args = tuple(args[0])
        _legacy_deprecated("shape, *, device=", "shape, dtype=, device=")
    size = tuple(args)
    indices = ember.zeros((len(size), 0), dtype=ember.int64, device=device)
    return sparse_coo_tensor(indices, ember.zeros(0, dtype=dtype, device=device), size,
                             check_invariants=False)


# the legacy types (classes: ``isinstance(s, ember.sparse.FloatTensor)``, ``s.type(...)``)
globals().update(_legacy_types.SPARSE_TYPES)


def __getattr__(name):
    """``torch.sparse.torch`` is the torch module itself (the popular CapsNet code builds
    one-hot rows with ``torch.sparse.torch.eye(n).index_select(0, labels)``)."""
    if name == "torch":
        import ember
        return ember
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"torch"})    # as PyTorch's dir() lists it
