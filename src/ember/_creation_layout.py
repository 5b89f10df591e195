"""The factories' ``layout`` argument: its type check, and the sparse tensors ``zeros`` and
``empty`` make (other factories refuse sparse layouts, as PyTorch's do)."""

from ember import _api, _dtype as D
from ember._from_data import _tp_name

__all__ = ["check_layout", "no_sparse_fill", "no_sparse_like", "sparse_zeros"]


def check_layout(layout, fn):
    """PyTorch's TypeError for a ``layout`` that is not a layout; whether it is sparse."""
    if layout is None or layout is _api.strided:
        return False
    if not isinstance(layout, _api.layout):
        raise TypeError(f"{fn}(): argument 'layout' must be torch.layout, not {_tp_name(layout)}")
    return True


def no_sparse_fill(layout, fn):
    """PyTorch's error for filling a sparse layout with a value other than zero."""
    if check_layout(layout, fn):
        raise RuntimeError("full(...) is not implemented for sparse layout")


def no_sparse_like(layout, fn):
    """PyTorch's error for a ``*_like`` factory (other than ``zeros_like``) asked for a
    sparse layout: it has no strided allocation on the sparse backends."""
    if check_layout(layout, fn):
        backend = "SparseCPU" if layout is _api.sparse_coo else "SparseCsrCPU"
        raise NotImplementedError(f"Could not run 'aten::empty_strided' with arguments from the "
                                  f"'{backend}' backend.")


_COMPRESSED = (_api.sparse_csr, _api.sparse_csc, _api.sparse_bsr, _api.sparse_bsc)


def sparse_zeros(shape, layout, dtype, device, requires_grad, fn):
    """An all-zero sparse tensor of ``shape`` (no stored elements), as ``zeros`` and
    ``empty`` make for a sparse ``layout``."""
    import ember                    # (ember.sparse imports ember._creation)
    from ember._creation import zeros
    dtype = D.get_default_dtype() if dtype is None else dtype
    if layout is _api.sparse_coo:
        made = ember.sparse_coo_tensor(
            zeros((len(shape), 0), dtype=D.int64, device=device),
            zeros(0, dtype=dtype, device=device), shape, check_invariants=False)
    elif layout in _COMPRESSED and len(shape) < 2:
        raise RuntimeError(f"ember.{fn}: Only batched sparse compressed (non-block) tensors are "
                           f"supported, but got size {list(shape)}")
    elif layout in _COMPRESSED[2:]:
        name = "SparseBsr" if layout is _api.sparse_bsr else "SparseBsc"
        raise RuntimeError(f"{fn}_sparse_compressed expected sparse compressed (non-block) "
                           f"tensor layout but got {name}")
    elif layout in _COMPRESSED:             # (leading dims: batches)
        batch = tuple(shape[:-2])
        compressed = shape[-2 if layout is _api.sparse_csr else -1]
        made = ember.sparse_compressed_tensor(
            zeros(batch + (compressed + 1,), dtype=D.int64, device=device),
            zeros(batch + (0,), dtype=D.int64, device=device),
            zeros(batch + (0,), dtype=dtype, device=device),
            shape, layout=layout, check_invariants=False)
    else:
        raise NotImplementedError(f"ember.{fn} makes no {layout} tensor of {len(shape)} dims")
    return made._set_requires_grad() if requires_grad else made
