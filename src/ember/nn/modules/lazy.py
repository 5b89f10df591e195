"""Lazy modules: parameters whose shapes are inferred from the first input (LazyLinear)."""

import itertools

from ember.autograd.grad_mode import no_grad
from ember.nn.modules import linear as _linear
from ember.nn.parameter import (Buffer, UninitializedBuffer, UninitializedParameter,  # noqa: F401
                                is_lazy)

__all__ = ["LazyModuleMixin", "UninitializedParameter", "UninitializedBuffer", "Buffer"]


class LazyModuleMixin:
    """Mixed in before a Module class: its UninitializedParameters are materialized by
    ``initialize_parameters(*inputs)`` on the first call (or by ``load_state_dict``), and the
    module then becomes ``cls_to_become``."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters,
                                                               with_kwargs=True)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for table, skip in ((self._parameters, ()), (self._buffers,
                                                     self._non_persistent_buffers_set)):
            for name, t in table.items():
                if t is not None and name not in skip:
                    destination[prefix + name] = t if is_lazy(t) or keep_vars else t.detach()

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict, missing_keys,
                        unexpected_keys, error_msgs):
        for name, t in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if key in state_dict and t is not None and is_lazy(t) \
                    and not is_lazy(state_dict[key]):
                with no_grad():
                    t.materialize(state_dict[key].shape)

    def initialize_parameters(self, *args, **kwargs):
        """Materialize the uninitialized parameters from the first inputs."""
        raise NotImplementedError(f"initialize_parameters is not implemented for "
                                  f"{type(self).__name__}")

    def has_uninitialized_params(self):
        """Whether any parameter or buffer is still uninitialized."""
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(),
                                                       self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None):
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        delattr(module, "_initialize_hook")
        delattr(module, "_load_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become


if hasattr(_linear, "Linear"):
    class LazyLinear(LazyModuleMixin, _linear.Linear):
        """A Linear layer whose ``in_features`` is inferred from the first input."""

        cls_to_become = _linear.Linear

        def __init__(self, out_features, bias=True, device=None, dtype=None):
            super().__init__(0, 0, False)
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            self.out_features = out_features
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)

        def reset_parameters(self):
            if not self.has_uninitialized_params() and self.in_features != 0:
                super().reset_parameters()

        def initialize_parameters(self, input):
            """Set ``in_features`` from ``input.shape[-1]`` and allocate the weights."""
            if self.has_uninitialized_params():
                with no_grad():
                    self.in_features = input.shape[-1]
                    self.weight.materialize((self.out_features, self.in_features))
                    if self.bias is not None:
                        self.bias.materialize((self.out_features,))
                    self.reset_parameters()

    __all__.append("LazyLinear")
