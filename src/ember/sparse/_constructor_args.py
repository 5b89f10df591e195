"""PyTorch's parser errors of the sparse constructors: ``size=None`` matches none of their
signatures (they take a size, or none at all), so PyTorch raises its "invalid combination of
arguments" TypeError where ember's defaults would have read None as "no size"."""

from ember.sparse import _layouts as L

__all__ = ["NO_SIZE", "refuse_none_size"]

NO_SIZE = object()      # the default of ``size``: not given (None given is refused)

_OPTIONS = ("ember.dtype dtype = None, ember.layout layout = None, ember.device device = None, "
            "bool pin_memory = False, bool requires_grad = False, bool check_invariants = None")
_COO_OPTIONS = ("ember.dtype dtype = None, ember.device device = None, bool pin_memory = False, "
                "bool requires_grad = False, bool check_invariants = None, "
                "bool is_coalesced = None")


def _signatures(name, layout):
    if layout is None:
        return (f"object indices, object values, *, {_COO_OPTIONS}",
                f"object indices, object values, tuple of ints size, *, {_COO_OPTIONS}",
                "tuple of ints size, *, ember.dtype dtype = None, ember.device device = None, "
                "bool requires_grad = False, bool check_invariants = None")
    compressed, plain = ("compressed_indices", "plain_indices") if \
        name == "sparse_compressed_tensor" else L.index_names(layout)
    given = f"object {compressed}, object {plain}, object values"
    return (f"{given}, tuple of ints size, *, {_OPTIONS}", f"{given}, *, {_OPTIONS}")


def refuse_none_size(name, layout=None):
    """Raise PyTorch's TypeError for the constructor ``name`` (of a compressed ``layout``; a
    COO tensor's when None) called with ``size=None``."""
    from ember.ops._call_site import call_site
    from ember.ops._overloads import listing, site_listing
    signatures = _signatures(name, layout)
    site = call_site("function")
    if site is not None and site.keywords is not None and site.frame.f_code.co_name in (
            "make", name):
        got, lines = site.got(), site_listing(signatures, site)
    else:       # (the call cannot be read: worded as if size came by keyword)
        n = 2 if layout is None else 3
        got = ", ".join(["Tensor"] * n + ["size=NoneType"])
        lines = "\n" + listing(signatures, ((None,) * n, {"size": None}), ("size",))
    raise TypeError(f"{name}() received an invalid combination of arguments - got ({got}), "
                    f"but expected one of:{lines}")
