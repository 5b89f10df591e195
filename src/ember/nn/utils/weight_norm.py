"""The older hook-based weight normalization (``nn.utils.weight_norm``): the weight is
recomputed from ``<name>_g`` and ``<name>_v`` before every forward."""

import warnings

from ember.nn.parameter import Parameter
from ember.nn.utils.parametrizations import norm_except_dim
from ember.ops.weight_norm import _weight_norm

__all__ = ["weight_norm", "remove_weight_norm", "WeightNorm"]


class WeightNorm:
    """The forward pre-hook that recomputes ``module.<name>`` from g and v."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return _weight_norm(v, g, self.dim)

    @staticmethod
    def apply(module, name, dim):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same "
                                   f"parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        reject_uninitialized(weight, "WeightNorm", "weight normalization")
        del module._parameters[name]
        module.register_parameter(name + "_g",
                                  Parameter(norm_except_dim(weight, fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Split ``module.<name>`` into magnitude ``<name>_g`` and direction ``<name>_v``
    (deprecated in PyTorch for ``nn.utils.parametrizations.weight_norm``)."""
    warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                  "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=2)
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Undo ``weight_norm``: ``module.<name>`` becomes a plain parameter again."""
    return remove_hook(module, WeightNorm, name, "weight_norm")


def reject_uninitialized(weight, hook, what):
    """Raise ValueError for a lazy module's not yet materialized ``weight``."""
    from ember.nn.parameter import UninitializedParameter
    if isinstance(weight, UninitializedParameter):
        raise ValueError(f"The module passed to `{hook}` can't have uninitialized parameters. "
                         f"Make sure to run the dummy forward before applying {what}")


def remove_hook(module, kind, name, what):
    """Take off ``module``'s forward pre-hook of class ``kind`` for ``name`` (a hook-based
    reparametrization, ``what``), making ``module.<name>`` a plain parameter again."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, kind) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"{what} of '{name}' not found in {module}")
