"""Named results of ops that return several tensors (``torch.return_types``)."""

import collections

__all__ = ["max", "min", "median", "nanmedian", "cummax", "cummin", "aminmax", "sort", "topk",
           "kthvalue", "mode", "histogram", "frexp"]


def _return_type(name, fields=("values", "indices")):
    base = collections.namedtuple(name, fields)

    def __repr__(self):
        shown = ",\n".join(f"{f}={v!r}" for f, v in zip(fields, self))
        return f"ember.return_types.{name}(\n{shown})"
    return type(name, (base,), {"__slots__": (), "__repr__": __repr__, "__module__": __name__,
                                "__doc__": f"The ({', '.join(fields)}) result of ``{name}``."})


max = _return_type("max")  # noqa: A001  (PyTorch's names)
min = _return_type("min")  # noqa: A001
median = _return_type("median")
nanmedian = _return_type("nanmedian")
cummax = _return_type("cummax")
cummin = _return_type("cummin")
aminmax = _return_type("aminmax", ("min", "max"))
sort = _return_type("sort")
topk = _return_type("topk")
kthvalue = _return_type("kthvalue")
mode = _return_type("mode")
histogram = _return_type("histogram", ("hist", "bin_edges"))
frexp = _return_type("frexp", ("mantissa", "exponent"))
