"""Named results of ops that return values with their indices (``torch.return_types``)."""

import collections

__all__ = ["max", "min", "median", "nanmedian", "cummax", "cummin"]


def _return_type(name):
    base = collections.namedtuple(name, ("values", "indices"))

    def __repr__(self):
        return f"ember.return_types.{name}(\nvalues={self.values!r},\nindices={self.indices!r})"
    return type(name, (base,), {"__slots__": (), "__repr__": __repr__, "__module__": __name__,
                                "__doc__": f"The (values, indices) result of ``{name}``."})


max = _return_type("max")  # noqa: A001  (PyTorch's names)
min = _return_type("min")  # noqa: A001
median = _return_type("median")
nanmedian = _return_type("nanmedian")
cummax = _return_type("cummax")
cummin = _return_type("cummin")
