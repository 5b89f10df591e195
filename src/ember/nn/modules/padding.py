"""Padding layers: Zero, Constant, Reflection, Replication and Circular, in 1, 2 and 3 dims."""

from ember.nn import functional as F
from ember.nn.modules.module import Module

__all__ = [f"{kind}Pad{nd}d" for kind in ("Zero", "Constant", "Reflection", "Replication",
                                         "Circular") for nd in (1, 2, 3)]


def _padding(padding, nd):
    if isinstance(padding, (list, tuple)):
        return tuple(padding)
    return (padding,) * (2 * nd)


class _PadNd(Module):
    """A fixed F.pad: ``padding`` is (left, right[, top, bottom[, front, back]])."""

    _nd = 1
    _mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _padding(padding, self._nd)

    def forward(self, input):
        return F.pad(input, list(self.padding), self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, list(self.padding), "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class _CircularPadNd(_PadNd):
    def forward(self, input):
        nd = self._nd
        if input.dim() not in (nd + 1, nd + 2):
            raise ValueError(f"expected {nd + 1}D or {nd + 2}D input (got {input.dim()}D input)")
        return super().forward(input)


def _layer(kind, base, nd, mode):
    doc = f"Pads the last {nd} dim{'s' if nd > 1 else ''} of the input ({kind.lower()})."
    return type(f"{kind}Pad{nd}d", (base,), {"_nd": nd, "_mode": mode, "__doc__": doc,
                                             "__module__": __name__})


for _nd in (1, 2, 3):
    for _kind, _base, _mode in (("Zero", _ZeroPadNd, "constant"),
                                ("Constant", _ConstantPadNd, "constant"),
                                ("Reflection", _PadNd, "reflect"),
                                ("Replication", _PadNd, "replicate"),
                                ("Circular", _CircularPadNd, "circular")):
        globals()[f"{_kind}Pad{_nd}d"] = _layer(_kind, _base, _nd, _mode)
