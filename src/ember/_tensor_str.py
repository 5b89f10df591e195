"""Printing tensors in PyTorch's format: ``tensor([1., 2.], dtype=ember.float64)``.

A tensor prints in two steps. A formatter (``_RealFormat``, or ``_ComplexFormat`` pairing two
of them) looks once at every value that will be shown and decides how each element is
written: integer-valued floats get a trailing dot, scientific notation when the magnitudes
span too wide a range, and one common width so that columns align. ``_layout`` then nests the
formatted elements in brackets, wrapping long rows at the line width and eliding the middle of
large tensors with ``...``. ``tensor_repr`` adds the prefix and the suffixes (device, dtype,
size, autograd state).
"""

import contextlib
import dataclasses
import math

import numpy as np

from ember import _dtype
from ember.backend import host_array, xp_of

__all__ = ["set_printoptions", "get_printoptions", "printoptions", "tensor_repr",
           "tensor_format"]


@dataclasses.dataclass
class _PrintOptions:
    precision: int = 4          # digits after the decimal point
    threshold: float = 1000     # more elements than this print summarised
    edgeitems: int = 3          # items kept at each end of every dimension in a summary
    linewidth: int = 80
    sci_mode: bool | None = None  # None: chosen from the values


PRINT_OPTS = _PrintOptions()

_PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """Set how tensors print (``torch.set_printoptions``)."""
    # As in PyTorch, an unknown profile name is ignored, and sci_mode is always assigned:
    # leaving it out restores the automatic choice.
    for name, value in _PROFILES.get(profile, {}).items():
        setattr(PRINT_OPTS, name, value)
    for name, value in (("precision", precision), ("threshold", threshold),
                        ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            setattr(PRINT_OPTS, name, value)
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions():
    """The current print options as a dict that set_printoptions accepts as keywords."""
    return dataclasses.asdict(PRINT_OPTS)


@contextlib.contextmanager
def printoptions(**kwargs):
    """Change the print options inside a ``with`` block (``torch._tensor_str.printoptions``)."""
    saved = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**saved)


# ----- element formats -------------------------------------------------------------------

class _RealFormat:
    """How each real element of one tensor is written, decided from all the values shown.

    Integer and bool tensors print their values as Python does. Floating tensors pick one
    of three notations from their nonzero finite values: whole numbers with a trailing dot
    ("2."), fixed point with ``precision`` decimals, or scientific notation when the largest
    magnitude is over 1e8, the smallest under 1e-4, or their ratio over 1000 (unless the
    ``sci_mode`` option forces the choice). Every element is right-aligned to ``width``,
    the widest nonzero finite value; zeros, nan and inf do not widen the column.
    """

    def __init__(self, values, floating):
        self.floating = floating
        self.whole = True
        self.sci = False
        if not floating:
            self.width = max((len(str(v)) for v in values.ravel().tolist()), default=1)
            return
        self.width = 1
        finite = values[np.isfinite(values) & (values != 0)].tolist()
        if not finite:
            return
        self.whole = all(v == math.ceil(v) for v in finite)
        smallest, largest = min(map(abs, finite)), max(map(abs, finite))
        if PRINT_OPTS.sci_mode is None:
            self.sci = largest / smallest > 1000.0 or largest > 1.0e8 or smallest < 1.0e-4
        else:
            self.sci = PRINT_OPTS.sci_mode
        self.width = max(len(self._text(v)) for v in finite)

    def _text(self, value):
        if not self.floating:
            return str(value)
        if self.sci:
            return f"{value:.{PRINT_OPTS.precision}e}"
        if self.whole:
            text = f"{value:.0f}"
            return text + "." if math.isfinite(value) else text
        return f"{value:.{PRINT_OPTS.precision}f}"

    def __call__(self, value):
        return self._text(value).rjust(self.width)


class _ComplexFormat:
    """Complex elements as ``real+imagj``, each part with its own ``_RealFormat``."""

    def __init__(self, values):
        self.real = _RealFormat(values.real, True)
        self.imag = _RealFormat(values.imag, True)
        self.width = self.real.width + self.imag.width + 1     # + "j"

    def __call__(self, value):
        imag = (self.imag(value.imag) + "j").lstrip()
        sign = "" if imag[0] == "-" else "+"
        return self.real(value.real) + sign + imag


def _element_format(values, dt):
    if dt.category == _dtype.COMPLEX:
        return _ComplexFormat(values)
    return _RealFormat(values, dt.category == _dtype.FLOATING)


# ----- layout ----------------------------------------------------------------------------

def _summary(array, edge):
    """The elements a summary shows: the first and last ``edge`` along every dim longer
    than ``2 * edge``."""
    take = xp_of(array).take
    for axis, n in enumerate(array.shape):
        if n > 2 * edge:
            array = take(array, list(range(edge)) + list(range(n - edge, n)), axis=axis)
    return array


def _layout(shown, shape, indent, fmt, summarize):
    """Bracketed text for ``shown``, the elements kept of a tensor of ``shape`` (ndim >= 1).

    Along a dimension that a summary cut (``shape`` longer than ``2 * edgeitems``), ``shown``
    holds the first and last ``edgeitems`` entries, and ``...`` marks the gap. A 1-D row
    holds as many elements per line as fit in the line width; rows of a 2-D tensor go on
    separate lines, and deeper nesting adds one blank line per extra dimension.
    """
    edge = PRINT_OPTS.edgeitems
    cut = summarize and shape[0] > 2 * edge
    if len(shape) == 1:
        if summarize and not edge:
            items = ["..."]
        elif cut:
            items = ([fmt(v) for v in shown[:edge].tolist()] + [" ..."]
                     + [fmt(v) for v in shown[edge:].tolist()])
        else:
            items = [fmt(v) for v in shown.tolist()]
        per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / (fmt.width + 2)))
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = [_layout(row, shape[1:], indent + 1, fmt, summarize) for row in shown]
    if cut:
        rows = rows[:edge] + ["..."] + rows[edge:]
    separator = "," + "\n" * (len(shape) - 1) + " " * (indent + 1)
    return "[" + separator.join(rows) + "]"


def _host_values(array, dt):
    """``array`` on the host, floating types widened to float64 (or complex128) for
    formatting; every ember floating type converts exactly."""
    if type(array) is not np.ndarray:
        array = host_array(array)       # (raises deferred GPU errors; sync-debug mode sees it)
    if dt.category == _dtype.FLOATING:
        return array.astype(np.float64)
    if dt.category == _dtype.COMPLEX:
        return array.astype(np.complex128)
    return array


def _contents(t, indent):
    """The bracketed values of a non-empty tensor, or the single value of a 0-dim one."""
    array, dt = t._data, t.dtype
    summarize = array.size > PRINT_OPTS.threshold
    shown = _host_values(_summary(array, PRINT_OPTS.edgeitems) if summarize else array, dt)
    fmt = _element_format(shown, dt)
    if array.ndim == 0:
        return fmt(shown.item())
    return _layout(shown, array.shape, indent, fmt, summarize)


# ----- the whole repr --------------------------------------------------------------------

def _is_plain(cls):
    """Plain tensors and Parameters print as ``tensor(``; other subclasses by class name."""
    from ember._tensor import Tensor
    return cls is Tensor or (cls.__name__ == "Parameter"
                             and cls.__module__.startswith("ember.nn")) \
        or cls.__module__ == "ember._conj_view"     # a conjugate view (``x.conj()``)


def _suffixes(t):
    out = []
    if t.device.type != "cpu":
        out.append(f"device='{t.device}'")
    default = _dtype.get_default_dtype()
    if t.is_meta:                   # no values: the size, and any dtype but the default
        out.append(f"size={tuple(t.shape)}")
        if t.dtype is not default:
            out.append(f"dtype={t.dtype}")
    elif t._data.size == 0:
        # No values to tell an integer tensor from a float one: any non-default dtype shows.
        if t.ndim != 1:
            out.append(f"size={tuple(t.shape)}")
        if t.dtype is not default:
            out.append(f"dtype={t.dtype}")
    else:
        if not PRINT_OPTS.edgeitems:
            out.append(f"size={tuple(t.shape)}")
        out += dtype_suffix(t.dtype)
    return out + autograd_suffix(t._grad_fn, t.requires_grad)


def dtype_suffix(dtype):
    """``["dtype=..."]`` unless the printed values imply ``dtype`` (the default float dtype,
    its complex kin, int64, bool), else ``[]``."""
    default = _dtype.get_default_dtype()
    default_complex = _dtype.complex128 if default is _dtype.float64 else _dtype.complex64
    if dtype in (default, default_complex, _dtype.int64, _dtype.bool_):
        return []
    return [f"dtype={dtype}"]


def autograd_suffix(grad_fn, requires_grad):
    """``["grad_fn=<...>"]``, ``["requires_grad=True"]`` or ``[]``."""
    if grad_fn is not None:
        return [f"grad_fn=<{type(grad_fn).__name__}>"]
    return ["requires_grad=True"] if requires_grad else []


def _close(text, suffixes, indent):
    """Append ``, suffix`` items and the closing parenthesis, wrapping at the line width.

    PyTorch's measure of the current line starts two columns over its real length (and is
    exact after a wrap); it decides where suffixes wrap, so it is kept.
    """
    line = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if line + len(suffix) + 2 > PRINT_OPTS.linewidth:
            text += ",\n" + " " * indent + suffix
            line = indent + len(suffix)
        else:
            text += ", " + suffix
            line += len(suffix) + 2
    return text + ")"


def tensor_repr(t, tensor_contents=None):
    """``repr(t)`` (and ``str(t)``) as PyTorch prints it."""
    prefix = "tensor(" if _is_plain(type(t)) else f"{type(t).__name__}("
    indent = len(prefix)
    if tensor_contents is not None:
        body = tensor_contents
    elif t.is_meta:
        body = "..."
    elif t._data.size == 0:
        body = "[]"
    else:
        body = _contents(t, indent)
    text = _close(prefix + body, _suffixes(t), indent)
    if prefix != "tensor(":
        return f"Parameter({text})" if _is_param(t) else text
    # a conjugate view made a parameter keeps its class (PyTorch's is a Parameter)
    return "Parameter containing:\n" + text if getattr(t, "_is_param", False) else text


def _is_param(t):
    """Whether ``t``, of a subclass that prints by its name, is a parameter: of a Parameter
    subclass, or a tensor subclass made a parameter by ``nn.Parameter(t)``."""
    return getattr(t, "_is_param", False) or any(
        c.__name__ == "Parameter" and c.__module__.startswith("ember.nn")
        for c in type(t).__mro__)


# ember's own subclasses that stand for PyTorch's plain Tensor (conjugate views, sparse,
# batched and dual tensors): PyTorch's type of such a tensor is Tensor itself
_STAND_INS = frozenset({"ember._conj_view", "ember.sparse._tensor", "ember.func._batched",
                        "ember.autograd.forward_ad", "ember.func._forward_primal"})


def tensor_format(t, spec):
    """``format(t, spec)``: a 0-dim tensor formats its value (``f"{loss:.3f}"``), as PyTorch's
    does for its plain Tensor type only; anything else prints as ``str(t)`` and refuses a
    format spec with object's TypeError, naming the class as PyTorch's would."""
    from ember._tensor import Tensor
    cls = type(t)
    plain = cls is Tensor or cls.__module__ in _STAND_INS
    param = plain and getattr(t, "_is_param", False)    # (PyTorch's is of class Parameter)
    if plain and not param and t.dim() == 0 and not t.is_meta:
        return format(t.detach().item(), spec)
    if spec:
        name = ("Parameter" if param else "Tensor") if plain else cls.__name__
        raise TypeError(f"unsupported format string passed to {name}.__format__")
    return str(t)
