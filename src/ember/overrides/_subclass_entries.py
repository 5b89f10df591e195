"""A Tensor subclass is offered ember's hand-written Tensor methods and properties as
PyTorch offers them (``Tensor.size``, ``Tensor.__getitem__``, ``Tensor.shape.__get__``).

Registry ops find their overriding operands as they dispatch (see NOTE [Entry points from
frames] in _entries.py), but a hand-written method such as ``size`` or ``__getitem__`` has no
such check, and giving every one of them one would slow plain tensors down. Instead, each
user-defined subclass gets, on itself, an entry for every such method and property it does
not define: the entry offers the call to ``__torch_function__`` (after any mode), and plain
tensors never see it.
"""

import functools

from ember._tensor import Tensor
from ember.overrides._catalog import unseen_by_modes
from ember.overrides._modes import STACK
from ember.overrides._protocol import handle_native, is_plain

__all__ = ["install_entries"]


def install_entries(cls):
    """Give the Tensor subclass ``cls`` an entry for each hand-written Tensor method and
    property that no class between it and Tensor defines."""
    below_tensor = cls.__mro__[:cls.__mro__.index(Tensor)]
    made = _entry_ids()
    for name, entry in _entries().items():
        found = [vars(k)[name] for k in below_tensor if name in vars(k)]
        if not found:
            setattr(cls, name, entry)
        elif id(found[0]) in made:
            # a user base's entry would hide a real definition further along the MRO (geoopt's
            # ``ManifoldParameter(ManifoldTensor, Parameter)`` and Parameter.__deepcopy__)
            real = next((value for value in found if id(value) not in made), None)
            if real is not None:
                setattr(cls, name, real)


@functools.cache
def _entry_ids():
    """The ids of the shared entries, to tell them from methods a class defines."""
    return frozenset(id(entry) for entry in _entries().values())


@functools.cache
def _entries():
    """name -> entry, made once and shared by every subclass."""
    from ember.overrides._switch import _wanted
    skip = unseen_by_modes("Tensor")
    entries = {}
    for name, value in vars(Tensor).items():
        value = _unswitched(value)
        if name not in skip and _wanted("Tensor", name, value):
            entries[name] = (_property_entry(name, value) if type(value) is property
                             else _method_entry(name, value))
    return entries


def _unswitched(value):
    """The Tensor attribute a torch function mode's stand-in replaced (any other: itself)."""
    return getattr(value, "original", None) or getattr(value, "_ember_mode_original", value)


def _method_entry(name, original):
    @functools.wraps(original)
    def method(*args, **kwargs):
        public = vars(Tensor)[name]         # (a mode's stand-in while one is active)
        if not STACK.modes and is_plain(type(args[0])):
            return public(*args, **kwargs)
        return handle_native(public, _flat(args, kwargs), *args, **kwargs)
    return method


def _property_entry(name, original):
    def fget(self):
        public = vars(Tensor)[name]
        if not STACK.modes and is_plain(type(self)):
            return public.__get__(self)
        return handle_native(public.__get__, (self,), self)

    def fset(self, value):
        public = vars(Tensor)[name]
        if not STACK.modes and is_plain(type(self)):
            return public.__set__(self, value)
        handle_native(public.__set__, (self, value), self, value)

    def fdel(self):
        vars(Tensor)[name].__delete__(self)

    return property(fget, fset if original.fset else None, fdel if original.fdel else None,
                    original.__doc__)


def _flat(args, kwargs):
    flat = []
    for x in (*args, *kwargs.values()):
        flat.extend(x if isinstance(x, (list, tuple)) else (x,))
    return flat
