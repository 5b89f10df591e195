"""Affine layers: Identity, Linear (``x A^T + b``) and Bilinear (``x1^T A x2 + b``)."""

import math
import warnings

import ember
from ember.nn import functional as F
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter

__all__ = ["Identity", "Linear", "Bilinear"]


class Identity(Module):
    """Return the input unchanged (any constructor arguments are ignored)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """Apply ``y = x A^T + b`` to the last dim of the input."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(ember.empty((out_features, in_features), **factory))
        if bias:
            self.bias = Parameter(ember.empty(out_features, **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """U(-1/sqrt(in_features), 1/sqrt(in_features)) for weight and bias, as PyTorch's
        kaiming_uniform_(a=sqrt(5))."""
        bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
        if self.weight.numel() == 0:        # as PyTorch's kaiming_uniform_ does
            warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        with ember.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Bilinear(Module):
    """Apply ``y = x1^T A x2 + b`` to the last dims of two inputs."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(ember.empty((out_features, in1_features, in2_features),
                                            **factory))
        if bias:
            self.bias = Parameter(ember.empty(out_features, **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """U(-1/sqrt(in1_features), 1/sqrt(in1_features)) for weight and bias."""
        if self.in1_features <= 0:
            raise ValueError("in1_features must be > 0, but got "
                             f"(in1_features={self.in1_features})")
        bound = 1 / math.sqrt(self.in1_features)
        with ember.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
