"""Named results of ops that return several tensors (``torch.return_types``)."""

import collections
import sys

__all__ = ["max", "min", "median", "nanmedian", "cummax", "cummin", "aminmax", "sort", "topk",
           "kthvalue", "mode", "histogram", "histogramdd", "frexp"]


def named_result(name, fields=("values", "indices")):
    """The named-tuple type ``ember.return_types.<name>`` for an op's several outputs."""
    base = collections.namedtuple(name, fields)

    def __repr__(self):
        shown = ",\n".join(f"{f}={v!r}" for f, v in zip(fields, self))
        return f"ember.return_types.{name}(\n{shown})"
    made = type(name, (base,), {"__slots__": (), "__repr__": __repr__,
                                "__module__": "ember.return_types",
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
