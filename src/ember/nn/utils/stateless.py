"""Call a module with some parameters and buffers temporarily replaced (``functional_call``).

This is the hook point for ``ember.func``: ``_reparametrize_module`` swaps tensors into the
module's tables (any tensor, including non-leaf ones) and restores the originals afterwards.
"""

import contextlib
import warnings

from ember._tensor import Tensor
from ember.nn.modules.module import Module
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


def _submodule(module, path):
    """The submodule at dotted ``path`` (PyTorch's errors for functional_call's keys)."""
    if not path:
        return module
    owner = module
    for i, attr in enumerate(path.split(".")):
        try:
            child = getattr(owner, attr)
        except AttributeError:
            raise AttributeError(f"{owner._get_name()} has no attribute `{attr}`") from None
        if not isinstance(child, Module):
            name = ".".join(path.split(".")[:i + 1])
            raise TypeError(f"submodule `{name}`: {child} is not an instance of "
                            f"torch.nn.Module")
        owner = child
    return owner


def _swap(module, dotted, value):
    """Put ``value`` (or _MISSING to remove) at ``dotted``; return what was there (_MISSING
    for nothing)."""
    path, _, name = dotted.rpartition(".")
    owner = _submodule(module, path)
    if not name:
        raise KeyError('tensor name can\'t be empty string ""')
    if value is not _MISSING and value is not None and not isinstance(value, (Tensor, property)):
        raise TypeError(f"{value} is not an instance of torch.Tensor")
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
    old = getattr(owner, name, _MISSING)
    if old is not _MISSING and not isinstance(old, Tensor):
        raise TypeError(f"attribute `{name}`: {old} is not an instance of torch.Tensor")
    if value is not _MISSING:
        setattr(owner, name, value)
    elif old is not _MISSING:
        delattr(owner, name)
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
        current = {name: _swap(module, name, old) for name, old in originals.items()}
        # a tensor the call rebound (``self.n = self.n + 1``) is handed back in the caller's
        # dict, as PyTorch does (not a removed one: PyTorch's sentinel is no tensor)
        for name in parameters_and_buffers:
            new = current.get(name, _MISSING)
            if new is not _MISSING and not isinstance(new, property):
                parameters_and_buffers[name] = new


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
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _reparametrize_module(module, parameters_and_buffers, tie_weights, strict):
        return module(*args, **(kwargs or {}))
