"""Every op, defined once. Importing this package registers them all and builds
``ember.<op>``, ``Tensor.<op>``, ``Tensor.<op>_`` and the Python operators.

An op module may define ``ALIASES = {"other_name": "op_name"}`` for PyTorch's other names of
the same op (``absolute`` for ``abs``): an entry point of its own for each name. It may also
define ``PUBLIC = {"name": function}`` for functions of the ember namespace that are built
from ops rather than being ops themselves (``allclose``), and ``FUNCTIONAL`` for those of
``ember.nn.functional``: a function, or the registry name of a top-level op PyTorch also
exposes there (``{"relu": "relu"}``).
"""

import functools
import types

from ember._warn import HIDDEN
from ember.amp.autocast_mode import install as install_autocast
from ember.ops import _out_dtypes, _registry, operators
from ember.ops import (arithmetic, binary_math, comparison, complex_ops, conversion,
                       decompositions, indexing, linalg, odds, products, reduction, scatter,
                       shape, sorting, special_math, spectral, stft, unary_math)
from ember.ops import dtype_view, grouped_mm, legacy_norms, segment_reduce, view_copies
from ember.ops import python_maps, weight_norm
from ember.ops import batch_norm_stats, fake_quantize, fake_quantize_learnable, quantized_mm
from ember.ops import (activations, affine, attention, conv, dropout, embedding,
                       gamma_sampling, loss, normalization, padding, pooling, random_nodes,
                       recurrent, resampling)

MODULES = (arithmetic, binary_math, comparison, complex_ops, conversion, decompositions,
           indexing, linalg, odds, products, reduction, scatter, shape, sorting, special_math,
           spectral, stft, unary_math, legacy_norms, segment_reduce, grouped_mm, view_copies,
           weight_norm,
           activations, affine, attention, conv, dropout, embedding, gamma_sampling, loss,
           normalization, padding, pooling, random_nodes, recurrent, resampling,
           batch_norm_stats, fake_quantize, fake_quantize_learnable, quantized_mm)

ALIASES = {}
PUBLIC = {}
FUNCTIONAL = {}
for _module in MODULES:
    ALIASES.update(getattr(_module, "ALIASES", {}))
    PUBLIC.update(getattr(_module, "PUBLIC", {}))
    FUNCTIONAL.update(getattr(_module, "FUNCTIONAL", {}))

operators.install()
_out_dtypes.install(_registry.REGISTRY)
_registry.attach_methods()
dtype_view.install()
install_autocast(_registry.REGISTRY, PUBLIC, FUNCTIONAL)


# the in-place methods PyTorch also exposes as functions (``torch.exp_(x)``)
TOP_LEVEL_IN_PLACE = (
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_",
    "arctan_", "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_",
    "clamp_max_", "clamp_min_", "clip_", "conj_physical_", "cos_", "cosh_", "deg2rad_",
    "detach_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_",
    "gcd_", "i0_",
    "index_put_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_",
    "nan_to_num_", "neg_", "negative_", "rad2deg_", "reciprocal_", "relu_", "resize_as_",
    "round_",
    "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_",
    "trunc_", "xlogy_", "zero_")


def public_functions():
    """``{name: function}`` for the ember namespace: every public op, alias and helper."""
    from ember._tensor import Tensor
    table = {name: op.function for name, op in _registry.REGISTRY.items()
             if not name.startswith("_") and not name.endswith("_") and op.namespace is None}
    table.update(PUBLIC)
    for alias, target in ALIASES.items():
        if target in table:
            table[alias] = _alias_entry(alias, table[target], "function")
    table.update({name: getattr(Tensor, name) for name in TOP_LEVEL_IN_PLACE
                  if name not in table})
    return table


def namespace_functions(namespace):
    """``{short name: function}`` of the ops that live in ``ember.<namespace>``."""
    return {op.short_name: op.function for op in _registry.REGISTRY.values()
            if op.namespace == namespace}


_ALIAS_ENTRIES = {}         # (alias, kind) -> its entry point


def _alias_entry(alias, target, kind):
    """The entry point ``alias`` of ``kind`` for ``target``'s: a generated entry point of its
    own, whose TypeErrors name the alias as PyTorch's do, when ``target`` is generated."""
    from ember.ops._entry_points import ENTRY_KINDS
    op = getattr(target, "_ember_op", None)
    if op is None or ENTRY_KINDS.get(getattr(target, "__code__", None)) != kind:
        if kind == "function" and isinstance(target, types.FunctionType):
            return _renaming(alias, target)
        return target
    if (alias, kind) not in _ALIAS_ENTRIES:
        _ALIAS_ENTRIES[alias, kind] = _registry.generate(op, kind, name=alias)
    return _ALIAS_ENTRIES[alias, kind]


def _renaming(alias, target):
    """The hand-written function ``target`` under the name ``alias``, whose TypeErrors name
    ``alias`` where they name ``target`` (``concat()`` for ``cat()``), as PyTorch's do."""
    name = target.__name__

    @functools.wraps(target)
    def entry(*args, **kwargs):
        try:
            return target(*args, **kwargs)
        except TypeError as error:
            if error.args and isinstance(error.args[0], str) and \
                    error.args[0].startswith(name + "("):
                error.args = (alias + error.args[0][len(name):], *error.args[1:])
            raise

    entry.__name__ = entry.__qualname__ = alias
    entry.__doc__ = f"Alias of :func:`ember.{name}`."
    # a guard's frame: the call-site reader takes the call from its args and kwargs, and a
    # warning's stacklevel steps over it
    HIDDEN.add(entry.__code__)
    return entry


def _install_alias_methods():
    from ember._tensor import Tensor
    for alias, target in ALIASES.items():
        if hasattr(Tensor, target) and not hasattr(Tensor, alias):
            setattr(Tensor, alias, _alias_entry(alias, getattr(Tensor, target), "method"))
        if hasattr(Tensor, target + "_") and not hasattr(Tensor, alias + "_"):
            setattr(Tensor, alias + "_",
                    _alias_entry(alias, getattr(Tensor, target + "_"), "inplace"))


_install_alias_methods()


def __getattr__(name):
    # ember.ops.aten and the namespaces of user-defined ops (ember.library), as torch.ops
    from ember.ops._namespaces import namespace
    return namespace(name)


def __dir__():
    from ember.ops._namespaces import namespaces
    return sorted(set(globals()) | set(namespaces()))
