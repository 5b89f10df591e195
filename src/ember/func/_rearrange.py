"""rearrange: einops-style axis reordering (``torch.func.rearrange``).

NOTE [rearrange]
A pattern ``"left -> right"`` names the input's axes on the left and the output's on the
right; ``(a b)`` is one dim made of the axes a and b (a major), ``...`` stands for the dims
no name covers, and ``1`` / ``()`` is a dim of size 1. The parsed pattern becomes a plan
(cached per pattern, ndim and given lengths) of three ember ops: reshape into the elementary
axes of the left side, permute them into the right side's order, reshape into the right
side's groups. Being plain ember ops, the result is differentiable, runs on any device and
batches under vmap. Errors follow torch's wording and order: syntax of each side, then the
ellipsis rules, the axis lengths' types, unnamed axes, names on one side only, unknown
lengths, the number of dims, and last the sizes (``DimensionBindError``).
"""

import functools
import keyword
import warnings

__all__ = ["rearrange", "DimensionBindError"]

_ELLIPSIS = "…"
_DOTS = "Expression may contain dots only inside ellipsis (...)"


class DimensionBindError(Exception):
    """A rearrange pattern's axes do not fit the sizes of the tensor's dims."""


class _Side:
    """One parsed side of a pattern: its top-level groups and what they name.

    A group is a tuple of names (``()`` for an unnamed axis of size 1), or ``_ELLIPSIS``
    for a bare ellipsis; an ellipsis inside brackets is the name ``_ELLIPSIS`` in a tuple.
    """

    def __init__(self):
        self.groups, self.names = [], set()
        self.ellipsis = self.bracketed_ellipsis = self.non_unit = False

    def add(self, token, group):
        """Record one token; ``group`` is the open bracket's list, or None at top level."""
        if token == _ELLIPSIS:
            self.ellipsis = True
            self.bracketed_ellipsis |= group is not None
        elif token.isdecimal():
            if int(token) == 0:
                raise ValueError("Anonymous axis should have positive length, not 0")
            self.non_unit |= int(token) != 1
            if group is None:
                self.groups.append(())
            return
        else:
            _check_identifier(token)
            if token in self.names:
                raise ValueError(f"Indexing expression contains duplicate dimension '{token}'")
        self.names.add(token)
        if group is not None:
            group.append(token)
        else:
            self.groups.append(token if token == _ELLIPSIS else (token,))


def _check_identifier(name):
    if not name.isidentifier():
        why = "not a valid python identifier"
    elif name[0] == "_" or name[-1] == "_":
        why = "axis name should should not start or end with underscore"
    else:
        if keyword.iskeyword(name):
            warnings.warn(f"It is discouraged to use axes names that are keywords: {name}",
                          RuntimeWarning, stacklevel=5)
        return
    raise ValueError(f"Invalid axis identifier: {name}\n{why}")


def _parse(expr):
    """Parse one side of a pattern into a ``_Side``."""
    if "." in expr:
        if "..." not in expr:
            raise ValueError(_DOTS)
        if expr.count("...") != 1 or expr.count(".") != 3:
            raise ValueError(_DOTS + "; only one ellipsis for tensor ")
        expr = expr.replace("...", _ELLIPSIS)
    side, group, token = _Side(), None, ""
    for ch in expr + " ":
        if ch.isalnum() or ch in "_" + _ELLIPSIS:
            token += ch
            continue
        if ch not in " ()":
            raise ValueError(f"Unknown character '{ch}'")
        if token:
            side.add(token, group)
            token = ""
        if ch == "(":
            if group is not None:
                raise ValueError("Axis composition is one-level (brackets inside brackets "
                                 "not allowed)")
            group = []
        elif ch == ")":
            if group is None:
                raise ValueError("Brackets are not balanced")
            side.groups.append(tuple(group))
            group = None
    if group is not None:
        raise ValueError(f"Imbalanced parentheses in expression: '{expr}'")
    return side


def _expand(groups, names):
    """``groups`` with the ellipsis replaced by ``names`` (bare: one group per name)."""
    out = []
    for g in groups:
        if g == _ELLIPSIS:
            out.extend((n,) for n in names)
        else:
            out.append(sum(((n,) if n != _ELLIPSIS else names for n in g), ()))
    return out


def _plan(pattern, ndim, lengths):
    """Check ``pattern`` against a tensor of ``ndim`` dims and the axis lengths (a tuple of
    (name, length) pairs); return (left groups, their dN names, permutation, right groups)."""
    parts = pattern.split("->")
    if len(parts) != 2:
        raise ValueError("Pattern must contain a single '->' separator")
    left, right = _parse(parts[0]), _parse(parts[1])
    if right.ellipsis and not left.ellipsis:
        raise ValueError(f"Ellipsis found in right side, but not left side of a pattern "
                         f"{pattern}")
    if left.bracketed_ellipsis:
        raise ValueError(f"Ellipsis is parenthesis in the left side is not allowed: {pattern}")
    for _, n in lengths:
        if not isinstance(n, int) or isinstance(n, bool):
            raise TypeError(f"rearrange axis lengths must be integers, got: {type(n)}")
    if left.non_unit or right.non_unit:
        raise ValueError("rearrange only supports unnamed axes of size 1")
    if left.names != right.names:
        raise ValueError(f"Identifiers only on one side of rearrange expression (should be on "
                         f"both): {left.names ^ right.names}")
    unknown = {name for name, _ in lengths} - left.names
    if unknown:
        raise ValueError(f"Identifiers not found in rearrange expression: {unknown}")
    named = len(left.groups) - left.ellipsis
    if named > ndim if left.ellipsis else named != ndim:
        relation = "less than or equal to" if left.ellipsis else "equal to"
        raise ValueError(f"Number of dimensions in pattern ({named}) must be {relation} the "
                         f"number of dimensions in the tensor ({ndim})")
    dots = tuple(f"{_ELLIPSIS}{i}" for i in range(ndim - named))
    left_groups, right_groups = _expand(left.groups, dots), _expand(right.groups, dots)
    dnames, k = [], 0
    for g in left_groups:
        dnames.append(tuple(f"d{k + i}" for i in range(max(len(g), 1))))
        k += len(dnames[-1])
    order = [n for g in left_groups for n in g]
    perm = tuple(order.index(n) for g in right_groups for n in g)
    return left_groups, dnames, perm, right_groups


_cached_plan = functools.lru_cache(maxsize=256)(_plan)


def _pack(names):
    return f"({', '.join(names)}{',' if len(names) == 1 else ''})"


def _bind(shape, groups, dnames, lengths):
    """The size of every left-side axis, from the dims' sizes and the given lengths."""
    sizes = dict(lengths)
    for size, group, names in zip(shape, groups, dnames):
        if not group:
            if size != 1:
                raise DimensionBindError(f"Dimension sizes to do not match ({size} != 1) when "
                                         f"matching dimension pack {_pack(names)}")
            continue
        missing = [i for i, n in enumerate(group) if n not in sizes]
        if len(missing) > 1:
            raise DimensionBindError(f"cannot infer the sizes of two dimensions at once "
                                     f"{names[missing[0]]} and {names[missing[1]]}")
        known = 1
        for n in group:
            known *= sizes.get(n, 1)
        if missing and size % known:
            shown = tuple(sizes.get(n, "?") for n in group)
            raise DimensionBindError(f"inferred dimension does not evenly fit into larger "
                                     f"dimension: {size} vs {shown}")
        if missing:
            sizes[group[missing[0]]] = size // known
        elif known != size:
            raise DimensionBindError(f"Dimension sizes to do not match ({size} != {known}) "
                                     f"when matching dimension pack {_pack(names)}")
    return sizes


def rearrange(tensor, pattern, **axes_lengths):
    """Reorder, split, merge, squeeze or unsqueeze dims by an einops pattern such as
    ``"b (h w) c -> b c h w"`` (``torch.func.rearrange``); a list of tensors is stacked."""
    import ember
    if isinstance(tensor, (list, tuple)):
        tensor = ember.stack(tensor)
    lengths = tuple(axes_lengths.items())
    if all(type(n) is int for _, n in lengths):
        plan = _cached_plan(pattern, tensor.ndim, lengths)
    else:                        # bools hash like ints: keep them out of the cache
        plan = _plan(pattern, tensor.ndim, lengths)
    left, dnames, perm, right = plan
    sizes = _bind(tensor.shape, left, dnames, lengths)
    elementary = [sizes[n] for g in left for n in g]
    if list(tensor.shape) != elementary:
        tensor = tensor.reshape(elementary)
    if perm != tuple(range(len(perm))):
        tensor = tensor.permute(perm)
    final = []
    for g in right:
        final.append(1)
        for n in g:
            final[-1] *= sizes[n]
    return tensor if list(tensor.shape) == final else tensor.reshape(final)
