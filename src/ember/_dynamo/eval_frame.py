"""OptimizedModule: what ``ember.compile`` returns for a module."""

from ember.nn import Module

__all__ = ["OptimizedModule"]


class OptimizedModule(Module):
    """A module wrapped by ``compile``: it runs ``_orig_mod`` and reads its attributes
    through, as PyTorch's wrapper does; its state_dict keys start with ``_orig_mod.``."""

    def __init__(self, mod):
        super().__init__()
        self._orig_mod = mod
        self.training = mod.training

    def forward(self, *args, **kwargs):
        """Call the wrapped module."""
        return self._orig_mod(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            wrapped = self.__dict__["_modules"].get("_orig_mod")
            if wrapped is None:
                raise
            return getattr(wrapped, name)
