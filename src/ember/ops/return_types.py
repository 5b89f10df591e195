"""Named results of ops that return several tensors (``torch.return_types``)."""

import collections
import sys

__all__ = ["max", "min", "median", "nanmedian", "cummax", "cummin", "aminmax", "sort", "topk",
           "kthvalue", "mode", "histogram", "histogramdd", "frexp"]


_NO_OUT = {"histogramdd"}          # the ops whose out= form PyTorch does not have


def named_result(name, fields=("values", "indices")):
    """The named-tuple type ``ember.return_types.<name>`` for an op's several outputs; its
    ``out_type`` (``<name>_out``) is what the op returns when given ``out=``."""
    made = _structseq(name, fields)
    if name not in _NO_OUT and not name.startswith("_"):
        made.out_type = _structseq(f"{name}_out", fields)
    return made


def _structseq(name, fields):
    """A named tuple that also behaves as PyTorch's structseq types: built from one sequence
    (``sort((values, indices))``) as well as from the fields, with ``n_fields``."""
    base = collections.namedtuple(name, fields)
    n = len(fields)

    def __new__(cls, *args, **kwargs):
        if len(args) == n:
            return tuple.__new__(cls, args)
        if len(args) == 1 and not kwargs:
            if isinstance(args[0], (str, bytes)) or not hasattr(args[0], "__len__"):
                raise TypeError("constructor requires a sequence")
            if len(args[0]) != n:
                raise TypeError(f"ember.return_types.{name}() takes a {n}-sequence "
                                f"({len(args[0])}-sequence given)")
            return tuple.__new__(cls, args[0])
        return base.__new__(cls, *args, **kwargs)

    def __repr__(self):
        shown = ",\n".join(f"{f}={v!r}" for f, v in zip(fields, self))
        return f"ember.return_types.{name}(\n{shown})"
    made = type(name, (base,), {"__slots__": (), "__new__": __new__, "__repr__": __repr__,
                                "__module__": "ember.return_types", "n_fields": n,
                                "n_sequence_fields": n, "n_unnamed_fields": 0,
                                "__doc__": f"The ({', '.join(fields)}) result of ``{name}``."})
    globals()[name] = made              # reachable (and picklable) by name, as in torch
    return made


# the types show (and pickle) as ember.return_types.<name>, PyTorch's torch.return_types
sys.modules.setdefault("ember.return_types", sys.modules[__name__])

max = named_result("max")  # noqa: A001  (PyTorch's names)
min = named_result("min")  # noqa: A001
median = named_result("median")
nanmedian = named_result("nanmedian")
cummax = named_result("cummax")
cummin = named_result("cummin")
aminmax = named_result("aminmax", ("min", "max"))
sort = named_result("sort")
topk = named_result("topk")
kthvalue = named_result("kthvalue")
mode = named_result("mode")
histogram = named_result("histogram", ("hist", "bin_edges"))
histogramdd = named_result("histogramdd", ("hist", "bin_edges"))
frexp = named_result("frexp", ("mantissa", "exponent"))
