"""``repr`` of sparse tensors in PyTorch's format::

    tensor(indices=tensor([[0, 1],
                           [2, 0]]),
           values=tensor([3., 4.]),
           size=(2, 3), nnz=2, layout=ember.sparse_coo)
"""

from ember._tensor_str import PRINT_OPTS, _contents, autograd_suffix, dtype_suffix
from ember.sparse import _layouts as L

__all__ = ["sparse_repr"]

_INDENT = len("tensor(")


def _part(name, t):
    """``name=tensor(...)`` for one part, its lines indented under the opening bracket."""
    prefix = f"{name}=tensor("
    t = t.detach()
    if t.is_meta:
        return f"{prefix}..., size={tuple(t.shape)})"
    if t.numel() == 0:
        return f"{prefix}[], size={tuple(t.shape)})"
    return prefix + _contents(t, _INDENT + len(prefix)) + ")"


def _suffixes(s):
    out = []
    if s.device.type != "cpu":
        out.append(f"device='{s.device}'")
    out.append(f"size={tuple(s.shape)}")
    if s.device.type != "meta":     # a meta tensor's count of elements is not known
        out.append(f"nnz={s._nnz()}")
    return out + dtype_suffix(s.dtype) + [f"layout={s.layout}"] + \
        autograd_suffix(s.grad_fn, s.requires_grad)


def sparse_repr(s):
    """``repr(s)`` of a sparse tensor."""
    gap = ",\n" + " " * _INDENT
    if s.layout is L.sparse_coo:
        parts = [_part("indices", s._i), _part("values", s._v)]
    else:
        compressed_name, plain_name = L.index_names(s.layout)
        parts = [_part(compressed_name, s._crow), _part(plain_name, s._col),
                 _part("values", s._v)]
    text = "tensor(" + gap.join(parts)
    # COO tensors start their suffixes on a new line; then both wrap at the line width,
    # measuring the line from two columns over its length, as PyTorch does
    force = s.layout is L.sparse_coo
    line = len(text) - text.rfind("\n") + 1
    for suffix in _suffixes(s):
        if force or line + len(suffix) + 2 > PRINT_OPTS.linewidth:
            text += gap + suffix
            line = _INDENT + len(suffix)
            force = False
        else:
            text += ", " + suffix
            line += len(suffix) + 2
    # a sparse tensor made a parameter keeps its class, marked by _is_param
    header = "Parameter containing:\n" if getattr(s, "_is_param", False) else ""
    return header + text + ")"
