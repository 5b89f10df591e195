"""Normalization over features: LayerNorm, GroupNorm, RMSNorm, LocalResponseNorm and
CrossMapLRN2d."""

import numbers

import ember
from ember.nn import functional as F
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter

__all__ = ["LayerNorm", "GroupNorm", "RMSNorm", "LocalResponseNorm", "CrossMapLRN2d"]


def _shape(normalized_shape):
    if isinstance(normalized_shape, numbers.Integral):    # (a NumPy integer too)
        return (normalized_shape,)
    return tuple(normalized_shape)


class LayerNorm(Module):
    """Normalize over the trailing ``normalized_shape`` dims, then scale and shift."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias, factory)

    def reset_parameters(self):
        """Weight ones, bias zeros."""
        _reset_affine(self)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    """Normalize groups of channels of an (N, C, *) input, then scale and shift."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        factory = {"device": device, "dtype": dtype}
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, num_channels, affine, bias, factory)

    def reset_parameters(self):
        """Weight ones, bias zeros."""
        _reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class RMSNorm(Module):
    """Divide by the root mean square over the trailing dims, then scale."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ember.empty(self.normalized_shape, device=device,
                                                dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Weight ones."""
        if self.weight is not None:
            with ember.no_grad():
                self.weight.fill_(1)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class _ResponseNorm(Module):
    """What the response normalizations keep: the window ``size`` and ``alpha``, ``beta``,
    ``k`` of ``x / (k + alpha / size * sum of squares) ** beta``."""

    def __init__(self, size, alpha, beta, k):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class LocalResponseNorm(_ResponseNorm):
    """Normalize each element by the squares of its neighbours across channels."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__(size, alpha, beta, k)

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)


class CrossMapLRN2d(_ResponseNorm):
    """Legacy local response normalization of a 4-D input across channels."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__(size, alpha, beta, k)

    def forward(self, input):
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D "
                             "instead.")
        return input * (self.k + self.alpha / self.size
                        * _cross_map_square_sum(input, self.size)).pow(-self.beta)


def _cross_map_square_sum(input, size):
    """Per channel c, the sum of squares over channels [c - half, c + half], plus channel 0
    wherever that window has left it: PyTorch's running-window update never subtracts channel
    0, and its values are the specification."""
    half = (size - 1) // 2
    square = input * input
    channels = input.shape[1]
    padded = F.pad(square, (0, 0, 0, 0, half, half))
    summed = sum(padded[:, shift:shift + channels] for shift in range(2 * half + 1))
    if channels > half + 1:
        stale = ember.zeros(channels, dtype=input.dtype, device=input.device)
        stale[half + 1:] = 1
        summed = summed + stale.view(1, -1, 1, 1) * square[:, :1]
    return summed


def _affine_parameters(module, shape, affine, bias, factory):
    """Give ``module`` a weight and (optionally) a bias of ``shape``, or None for both, and
    initialize them."""
    if affine:
        module.weight = Parameter(ember.empty(shape, **factory))
        if bias:
            module.bias = Parameter(ember.empty(shape, **factory))
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)
    module.reset_parameters()


def _reset_affine(module):
    """Weight ones, bias zeros (where they exist)."""
    with ember.no_grad():
        if module.weight is not None:
            module.weight.fill_(1)
        if module.bias is not None:
            module.bias.zero_()
