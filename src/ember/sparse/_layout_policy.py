"""Which layouts each sparse op keeps or refuses, in PyTorch's words: the checks the handlers
of _ops.py and _inplace.py run before computing anything (a compressed operand where PyTorch
has only a COO kernel, the layout pairs add, mul and copy_ accept)."""

from ember.sparse import _layouts as L
from ember.sparse._dispatch import backend_name, is_sparse


def _coo_only(input, name):
    if input.layout is not L.sparse_coo:
        raise NotImplementedError(f"Could not run 'aten::{name}' with arguments from the "
                                  f"'{backend_name((input,))}' backend.")


def _is_compressed(x):
    return is_sparse(x) and x.layout is not L.sparse_coo


def _refuse_compressed(*operands):
    """PyTorch's error for an op that has no kernel for compressed layouts (pow, sub, div,
    the comparisons...), naming the first compressed operand's layout."""
    for x in operands:
        if _is_compressed(x):
            raise RuntimeError(f"unsupported tensor layout: {L.short_name(x.layout)}")


def _check_add_layouts(input, other):
    """PyTorch adds two compressed tensors only when both are CSR (or a tensor to itself),
    and only CSR and CSC ones to strided tensors."""
    compressed = [x for x in (input, other) if _is_compressed(x)]
    if not compressed:
        return
    if is_sparse(input) and is_sparse(other):
        # PyTorch adds two compressed tensors only as CSR ones (or a tensor to itself)
        if input is other or input.layout is other.layout is L.sparse_csr:
            return
        if input.layout is L.sparse_coo:
            raise RuntimeError("memory format option is only supported by strided tensors")
        columns = [x for x in (other, input) if x.layout in (L.sparse_csc, L.sparse_bsc)]
        if columns:
            raise RuntimeError(f"crow_indices expected sparse row compressed tensor layout "
                               f"but got {L.short_name(columns[0].layout)}")
        raise RuntimeError(f"add: PyTorch has no kernel adding {L.short_name(input.layout)} "
                           f"and {L.short_name(other.layout)} tensors")
    kind = L.short_name(compressed[0].layout)
    if L.blocked(compressed[0].layout):
        raise RuntimeError(f"add: PyTorch has no kernel adding a {kind} tensor and a strided "
                           f"one (only SparseCsr and SparseCsc)")


def _check_mul_layouts(input, other):
    """PyTorch multiplies a compressed tensor by a tensor (not a scalar) only into a CSR
    result: a CSR ``input`` by a tensor of any layout, or a strided ``input`` by a CSR
    ``other``."""
    if not (_is_compressed(input) or _is_compressed(other)):
        return
    if _is_compressed(input) and L.blocked(input.layout):
        raise RuntimeError(f"empty_sparse_compressed expected sparse compressed (non-block) "
                           f"tensor layout but got {L.short_name(input.layout)}")
    if is_sparse(input):
        s, rest = input, other
        fine = input.layout is L.sparse_csr         # times any sparse or dense other
    else:
        s, rest = other, input
        fine = other.layout is L.sparse_csr
    if not fine:
        raise RuntimeError("Expected result Tensor to be of format CSR")
    if not is_sparse(rest) and tuple(rest.shape) != tuple(s.shape):
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size "
                           f"{list(rest.shape)} but mask has size {list(s.shape)}")


# of the ops on the values alone (_ops.py's _ZERO_PRESERVING), those PyTorch computes on COO
# tensors only, and the error it gives a compressed one
_COO_ONLY = {"square": RuntimeError, "nan_to_num": NotImplementedError}


def _refuse_values_op(name, input):
    if _COO_ONLY[name] is RuntimeError:
        _refuse_compressed(input)
    raise NotImplementedError(f"Could not run 'aten::{name}.out' with arguments from the "
                              f"'{backend_name((input,))}' backend.")


def _check_copy_layouts(self, src):
    if self.layout is L.sparse_coo:
        if src.layout is not L.sparse_coo:
            raise RuntimeError(f"copy_: ember copies into a COO tensor only from a COO one, "
                               f"not {L.short_name(src.layout)}")
        return
    if is_sparse(src) and src.layout is L.sparse_coo:
        raise RuntimeError("copy_sparse_compressed_ expected sparse compressed tensor layout "
                           "but got Sparse")
    if not is_sparse(src) or src.layout is not self.layout:
        other = L.short_name(src.layout) if is_sparse(src) else "Strided"
        raise RuntimeError(f"torch.copy_: copy of sparse compressed tensors having different "
                           f"layouts is not supported. self layout is "
                           f"{L.short_name(self.layout)} and src layout is {other}")
    for dim, (mine, theirs) in enumerate(zip(self.shape, src.shape)):
        if mine != theirs:
            raise RuntimeError(f"torch.copy_: expected shapes of self and src to match along "
                               f"dimension {dim} for {L.short_name(self.layout)} layout but "
                               f"the corresponding dimensions of self and src are {mine} and "
                               f"{theirs}, respectively.")
    if src._nnz() != self._nnz():
        raise RuntimeError("torch.copy_: only sparse compressed tensors with the same number "
                           "of specified elements are supported.")
