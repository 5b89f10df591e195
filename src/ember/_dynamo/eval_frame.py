"""OptimizedModule: what ``ember.compile`` returns for a module."""

from collections.abc import Sized

from ember.nn import Module

__all__ = ["OptimizedModule"]


class OptimizedModule(Module):
    """A module wrapped by ``compile``: it runs ``_orig_mod`` and, as PyTorch's wrapper does,
    reads, writes and deletes the wrapped module's attributes (``training`` included), so that
    state set on the compiled model (``net.mem = None``) reaches the module that runs; its
    state_dict keys start with ``_orig_mod.``."""

    # written on the wrapper itself; every other attribute goes to the wrapped module
    _opt_mod_attributes = frozenset({"_orig_mod", "forward", "__dict__"})

    def __init__(self, mod):
        super().__init__()
        self._orig_mod = mod

    def forward(self, *args, **kwargs):
        """Call the wrapped module."""
        return self._orig_mod(*args, **kwargs)

    @property
    def training(self):
        return self._orig_mod.training

    @training.setter
    def training(self, value):
        self._orig_mod.training = value

    def __getattr__(self, name):
        wrapped = self.__dict__.get("_modules", {}).get("_orig_mod")
        if wrapped is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        if name == "_orig_mod":
            return wrapped
        return getattr(wrapped, name)

    def __setattr__(self, name, value):
        if hasattr(type(self), name) or name in OptimizedModule._opt_mod_attributes:
            return super().__setattr__(name, value)
        return setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        if hasattr(type(self), name) or name in OptimizedModule._opt_mod_attributes:
            return super().__delattr__(name)
        return delattr(self._orig_mod, name)

    def __len__(self):
        if isinstance(self._orig_mod, Sized):
            return len(self._orig_mod)
        raise TypeError(f"{type(self._orig_mod).__name__} does not support len()")

    def __dir__(self):
        orig_mod_attrs = self._orig_mod.__dir__()
        return orig_mod_attrs + [a for a in super().__dir__() if a not in orig_mod_attrs]

    def __reduce__(self):
        return (self.__class__, (self._orig_mod,))
