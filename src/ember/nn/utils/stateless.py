"""Call a module with some parameters and buffers temporarily replaced (``functional_call``).

This is the hook point for ``ember.func``: ``_reparametrize_module`` swaps tensors into the
module's tables (any tensor, including non-leaf ones) and restores the originals afterwards.
"""

import contextlib
import warnings

from ember._tensor import Tensor
from ember.nn.utils.parametrize import is_parametrized

__all__ = ["functional_call"]

_MISSING = object()


def _tied_names(module):
    """Map each tensor name to every name under which the same tensor is registered."""
    groups = {}
    for table in ("named_parameters", "named_buffers"):
        for name, t in getattr(module, table)(remove_duplicate=False):
            groups.setdefault(id(t), []).append(name)
    return {name: names for names in groups.values() for name in names}


def _swap(module, dotted, value):
    """Put ``value`` (or _MISSING to remove) at ``dotted``; return what was there."""
    path, _, name = dotted.rpartition(".")
    owner = module.get_submodule(path)
    if is_parametrized(owner, name):
        return _swap_parametrized(owner, name, value)
    for table in (owner._parameters, owner._buffers):
        if name in table:
            old = table[name]
            if value is _MISSING:
                del table[name]
            else:
                table[name] = value
            return old
    old = owner.__dict__.get(name, _MISSING)
    if value is _MISSING:
        owner.__dict__.pop(name, None)
    else:
        owner.__dict__[name] = value
    return old


def _swap_parametrized(owner, name, value):
    """As documented for ``functional_call``: a value given under a parametrized tensor's own
    name replaces the parametrization for the call (``value`` is the saved property when
    restoring); returns the property that was there."""
    cls = type(owner)                    # the class register_parametrization made for owner
    old = cls.__dict__[name]
    if isinstance(value, property):
        setattr(cls, name, value)
    else:
        def get(self, _owner=owner, _value=value, _old=old.fget):
            return _value if self is _owner else _old(self)
        setattr(cls, name, property(get, old.fset))
    return old


@contextlib.contextmanager
def _reparametrize_module(module, parameters_and_buffers, tie_weights=False, strict=False):
    values = dict(parameters_and_buffers)
    for value in values.values():
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(f"{value} is not an instance of torch.Tensor")
    if tie_weights:
        tied = _tied_names(module)
        for name in list(values):
            for other in tied.get(name, ()):
                if other in values and values[other] is not values[name]:
                    raise ValueError(f"functional_call got multiple values for keys "
                                     f"{sorted(n for n in tied[name] if n in values)}, which "
                                     f"are tied. Consider using tie_weights=False")
                values.setdefault(other, values[name])
    if strict:
        expected = {n for n, _ in module.named_parameters(remove_duplicate=False)} | \
            {n for n, _ in module.named_buffers(remove_duplicate=False)}
        missing = sorted(expected - set(values))
        unexpected = sorted(set(values) - expected)
        if missing or unexpected:
            msgs = []
            if unexpected:
                msgs.append("Unexpected key(s): {}.".format(", ".join(map(repr, unexpected))))
            if missing:
                msgs.append("Missing key(s): {}.".format(", ".join(map(repr, missing))))
            raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(
                module._get_name(), "\n\t".join(msgs)))
    originals = {}
    try:
        for name, value in values.items():
            originals[name] = _swap(module, name, value)
        yield
    finally:
        for name, old in originals.items():
            _swap(module, name, old)


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """``module(*args, **kwargs)`` with the named parameters/buffers replaced for the call
    (deprecated in favour of ``torch.func.functional_call``)."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 "
                  "and will be removed in a future version of PyTorch. Please use "
                  "`torch.func.functional_call` instead which is a drop-in replacement.",
                  FutureWarning, stacklevel=2)
    return _functional_call(module, parameters_and_buffers, args, kwargs,
                            tie_weights=tie_weights, strict=strict)


def _functional_call(module, parameters_and_buffers, args=None, kwargs=None, *,
                     tie_weights=True, strict=False):
    """``functional_call`` without the deprecation warning (what ``ember.func`` calls)."""
    if isinstance(parameters_and_buffers, (list, tuple)):
        merged, repeated = {}, []
        for d in parameters_and_buffers:
            for key, value in d.items():
                if key in merged and key not in repeated:
                    repeated.append(key)
                merged[key] = value
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of "
                             f"functional call is ambiguous")
        parameters_and_buffers = merged
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _reparametrize_module(module, parameters_and_buffers, tie_weights, strict):
        return module(*args, **(kwargs or {}))
