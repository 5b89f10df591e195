"""Lazy modules: parameters whose shapes are inferred from the first input (LazyLinear)."""

import itertools

from ember.autograd.grad_mode import no_grad
from ember.nn.modules import batchnorm as _batchnorm
from ember.nn.modules import conv as _conv
from ember.nn.modules import instancenorm as _instancenorm
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
    _linear.LazyLinear = LazyLinear     # PyTorch defines it in nn.modules.linear


# Lazy convolutions and norms are derived from the layer classes (written elsewhere, with
# PyTorch's constructor signatures and attribute names) once those exist.

class _LazyConvMixin(LazyModuleMixin):
    """Conv/ConvTranspose whose ``in_channels`` is inferred from the first input."""

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        self._lazy_init(out_channels, kernel_size, bias, device, dtype, stride=stride,
                        padding=padding, dilation=dilation, groups=groups,
                        padding_mode=padding_mode)

    def _lazy_init(self, out_channels, kernel_size, bias, device, dtype, **kwargs):
        super().__init__(0, 0, kernel_size, bias=False, device=device, dtype=dtype, **kwargs)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        """Set ``in_channels`` from the input's channel dim and allocate the weights."""
        if not self.has_uninitialized_params():
            return
        spatial = len(self.kernel_size)
        if input.dim() not in (spatial + 1, spatial + 2):
            raise RuntimeError(f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D "
                               f"(batched) input to {type(self).__name__}, but got input of "
                               f"size: {input.shape}")
        self.in_channels = input.shape[1] if input.dim() == spatial + 2 else input.shape[0]
        if self.in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        with no_grad():
            if getattr(self, "transposed", False):
                shape = (self.in_channels, self.out_channels // self.groups)
            else:
                shape = (self.out_channels, self.in_channels // self.groups)
            self.weight.materialize(shape + tuple(self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


class _LazyConvTransposeMixin(_LazyConvMixin):
    """ConvTranspose whose ``in_channels`` is inferred (PyTorch's positional order)."""

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None,
                 dtype=None):
        self._lazy_init(out_channels, kernel_size, bias, device, dtype, stride=stride,
                        padding=padding, output_padding=output_padding, groups=groups,
                        dilation=dilation, padding_mode=padding_mode)


class _LazyNormMixin(LazyModuleMixin):
    """BatchNorm/InstanceNorm whose ``num_features`` is inferred from the first input."""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        from ember import tensor
        super().__init__(0, eps, momentum, False, False, device, dtype, bias=bias)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = tensor(0, dtype=_int64(), device=device)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        """Set ``num_features`` from the input's channel dim and allocate the state."""
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[1] if input.dim() > 1 else input.shape[0]
        with no_grad():
            for t in (self.weight, self.bias, self.running_mean, self.running_var):
                if t is not None and is_lazy(t):
                    t.materialize((self.num_features,))
            self.reset_parameters()


def _int64():
    from ember import int64
    return int64


def _lazy(base, mixin, name):
    cls = type(name, (mixin, base), {"cls_to_become": base, "__module__": __name__,
                                     "__doc__": f"{base.__name__} with its input size "
                                                f"inferred from the first input."})
    globals()[name] = cls
    __all__.append(name)
    setattr(_module_of[name], name, cls)   # where PyTorch defines it: nn.modules.conv, ...


_LAZY = ((_conv, _LazyConvMixin, ("Conv1d", "Conv2d", "Conv3d")),
         (_conv, _LazyConvTransposeMixin, ("ConvTranspose1d", "ConvTranspose2d",
                                           "ConvTranspose3d")),
         (_batchnorm, _LazyNormMixin, ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d")),
         # PyTorch's lazy instance norms take the batch norms' defaults (affine=True,
         # track_running_stats=True), not InstanceNorm's, whatever their docstrings say
         (_instancenorm, _LazyNormMixin, ("InstanceNorm1d", "InstanceNorm2d",
                                          "InstanceNorm3d")))
_module_of = {"Lazy" + n: m for m, _, names in _LAZY for n in names}
for _module, _mixin, _names in _LAZY:
    for _name in _names:
        if hasattr(_module, _name):
            _lazy(getattr(_module, _name), _mixin, "Lazy" + _name)
