"""What the ember.backends modules share: PyTorch's type check on a flag's new value, and a
module attribute that applies it (``torch.backends.cudnn.benchmark = 1`` raises)."""

import contextlib
import types

__all__ = ["check_bool", "Flag", "FlagModule", "flags_in_block"]


def check_bool(setter, value):
    """``value`` if it is a bool; else PyTorch's RuntimeError naming its C++ ``setter``."""
    if type(value) is not bool:
        raise RuntimeError(f"{setter} expects a bool, but got {type(value).__name__}")
    return value


class Flag:
    """A bool attribute of a ``FlagModule``, kept in the module's ``_FLAGS`` dict (so that
    a context manager can save and restore them all) and type-checked when assigned."""

    def __init__(self, setter):
        self.setter = setter

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, module, owner=None):
        return self if module is None else module._FLAGS[self.name]

    def __set__(self, module, value):
        module._FLAGS[self.name] = check_bool(self.setter, value)


class FlagModule(types.ModuleType):
    """The base of a module class whose ``Flag`` attributes check what scripts assign."""


@contextlib.contextmanager
def flags_in_block(module, **wanted):
    """Set ``module``'s flags to ``wanted`` (type-checked) inside a ``with`` block and
    restore them all after it."""
    saved = dict(module._FLAGS)
    try:
        for name, value in wanted.items():
            setattr(module, name, value)
        yield
    finally:
        module._FLAGS.update(saved)
