"""Convolution layers: Conv1d/2d/3d and ConvTranspose1d/2d/3d."""

import math
import warnings

import ember
from ember.nn import functional as F
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(value, n):
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,) * n


class _ConvNd(Module):
    """What the convolution layers share: parameters, initialization and repr."""

    _nd = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 output_padding, groups, bias, padding_mode, device=None, dtype=None):
        super().__init__()
        nd = self._nd
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in _ntuple(stride, nd)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {{'zeros', 'circular', 'replicate', "
                             f"'reflect'}}, but got padding_mode={padding_mode!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, nd)
        self.stride = _ntuple(stride, nd)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, nd)
        self.dilation = _ntuple(dilation, nd)
        self.transposed = self._transposed
        self.output_padding = _ntuple(output_padding, nd)
        self.groups = groups
        self.padding_mode = padding_mode
        self._reversed_padding_repeated_twice = self._reversed_padding()
        factory = {"device": device, "dtype": dtype}
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(ember.empty(shape, **factory))
        if bias:
            self.bias = Parameter(ember.empty(out_channels, **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _reversed_padding(self):
        """F.pad's argument for the padding (last dim first, (low, high) each)."""
        if self.padding == "valid":
            return [0, 0] * self._nd
        if self.padding == "same":
            out = []
            for d, k in zip(reversed(self.dilation), reversed(self.kernel_size)):
                total = d * (k - 1)
                out += [total // 2, total - total // 2]
            return out
        return tuple(p for p in reversed(self.padding) for _ in range(2))   # a tuple, as PyTorch

    def reset_parameters(self):
        """PyTorch's init: kaiming_uniform(a=sqrt(5)) weight and U(-1/sqrt(fan_in), ...) bias,
        both of which come to U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
        fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        if self.weight.numel() == 0:        # as PyTorch's kaiming_uniform_ does
            warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        with ember.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def extra_repr(self):
        nd = self._nd
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * nd:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, 0,
                         groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input, weight, bias):
        conv = getattr(F, f"conv{self._nd}d")
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f'{type(self).__name__}')
        if isinstance(padding, str):    # PyTorch's _ntuple makes a string a tuple of letters
            padding = tuple(padding)
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         output_padding, groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input, output_size):
        """The output_padding that gives ``output_size`` (PyTorch's rule)."""
        if output_size is None:
            return self.output_padding
        nd = self._nd
        if len(output_size) == nd + 2 or (len(output_size) == nd + 1 and input.dim() == nd + 1):
            output_size = output_size[-nd:]       # a slice, of the same kind as given
        if len(output_size) != nd:
            raise ValueError(f"ConvTranspose{nd}D: for {input.dim()}D input, output_size must "
                             f"have {nd} or {input.dim()} elements (got {len(output_size)})")
        spatial = list(input.shape[-nd:])
        lo = [(s - 1) * st - 2 * p + d * (k - 1) + 1
              for s, st, p, d, k in zip(spatial, self.stride, self.padding, self.dilation,
                                        self.kernel_size)]
        hi = [m + st - 1 for m, st in zip(lo, self.stride)]
        sizes = [int(s) for s in output_size]
        for want, a, b in zip(sizes, lo, hi):
            if not a <= want <= b:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes "
                                 f"range from {lo} to {hi} (for an input of "
                                 f"{ember.Size(spatial)})")
        return tuple(w - a for w, a in zip(sizes, lo))

    def forward(self, input, output_size=None):
        opad = self._output_padding(input, output_size)
        conv = getattr(F, f"conv_transpose{self._nd}d")
        return conv(input, self.weight, self.bias, self.stride, self.padding, opad, self.groups,
                    self.dilation)


_ConvTransposeNd = _ConvTranspose   # PyTorch's name (libraries test isinstance against it)


class Conv1d(_Conv):
    """Applies a 1-d convolution over an input of several planes (see F.conv1d)."""
    _nd = 1


class Conv2d(_Conv):
    """Applies a 2-d convolution over an input of several planes (see F.conv2d)."""
    _nd = 2


class Conv3d(_Conv):
    """Applies a 3-d convolution over an input of several planes (see F.conv3d)."""
    _nd = 3


class ConvTranspose1d(_ConvTranspose):
    """Applies a 1-d transposed convolution (see F.conv_transpose1d)."""
    _nd = 1


class ConvTranspose2d(_ConvTranspose):
    """Applies a 2-d transposed convolution (see F.conv_transpose2d)."""
    _nd = 2


class ConvTranspose3d(_ConvTranspose):
    """Applies a 3-d transposed convolution (see F.conv_transpose3d)."""
    _nd = 3
