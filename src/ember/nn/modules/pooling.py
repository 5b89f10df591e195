"""Pooling layers: max, average, adaptive, power-average pooling and max unpooling."""

from ember.nn import functional as F
from ember.nn.modules._functional_form import functional_form
from ember.nn.modules.module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
           "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "LPPool1d", "LPPool2d", "LPPool3d",
           "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "FractionalMaxPool2d",
           "FractionalMaxPool3d"]


def _ntuple(value, n):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


class _MaxPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")

    def forward(self, input):
        return self._function(input, self.kernel_size, self.stride, self.padding, self.dilation,
                              ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool1d(_MaxPoolNd):
    """1-D max pooling over an input of shape (N, C, L) or (C, L)."""

    _function = functional_form("max_pool1d")


class MaxPool2d(_MaxPoolNd):
    """2-D max pooling over an input of shape (N, C, H, W) or (C, H, W)."""

    _function = functional_form("max_pool2d")


class MaxPool3d(_MaxPoolNd):
    """3-D max pooling over an input of shape (N, C, D, H, W) or (C, D, H, W)."""

    _function = functional_form("max_pool3d")


class AvgPool1d(Module):
    """1-D average pooling over an input of shape (N, C, L) or (C, L)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, 1)
        self.stride = _ntuple(stride if stride is not None else kernel_size, 1)
        self.padding = _ntuple(padding, 1)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class _AvgPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input):
        return self._function(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                              self.count_include_pad, self.divisor_override)


class AvgPool2d(_AvgPoolNd):
    """2-D average pooling over an input of shape (N, C, H, W) or (C, H, W)."""

    _function = functional_form("avg_pool2d")


class AvgPool3d(_AvgPoolNd):
    """3-D average pooling over an input of shape (N, C, D, H, W) or (C, D, H, W)."""

    _function = functional_form("avg_pool3d")


class _AdaptiveAvgPoolNd(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def extra_repr(self):
        return f"output_size={self.output_size}"

    def forward(self, input):
        return self._function(input, self.output_size)


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """1-D average pooling to a fixed output length."""

    _function = functional_form("adaptive_avg_pool1d")


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """2-D average pooling to a fixed output size (None keeps that dim's input size)."""

    _function = functional_form("adaptive_avg_pool2d")


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """3-D average pooling to a fixed output size (None keeps that dim's input size)."""

    _function = functional_form("adaptive_avg_pool3d")


class _AdaptiveMaxPoolNd(Module):
    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def extra_repr(self):
        return f"output_size={self.output_size}"

    def forward(self, input):
        return self._function(input, self.output_size, self.return_indices)


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """1-D max pooling to a fixed output length."""

    _function = functional_form("adaptive_max_pool1d")


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """2-D max pooling to a fixed output size (None keeps that dim's input size)."""

    _function = functional_form("adaptive_max_pool2d")


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """3-D max pooling to a fixed output size (None keeps that dim's input size)."""

    _function = functional_form("adaptive_max_pool3d")


class _LPPoolNd(Module):
    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")

    def forward(self, input):
        return self._function(input, float(self.norm_type), self.kernel_size, self.stride,
                              self.ceil_mode)


class LPPool1d(_LPPoolNd):
    """1-D power-average pooling: the p-norm of each window."""

    _function = functional_form("lp_pool1d")


class LPPool2d(_LPPoolNd):
    """2-D power-average pooling: the p-norm of each window."""

    _function = functional_form("lp_pool2d")


class LPPool3d(_LPPoolNd):
    """3-D power-average pooling: the p-norm of each window."""

    _function = functional_form("lp_pool3d")


class _MaxUnpoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        n = self._nd
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride if stride is not None else kernel_size, n)
        self.padding = _ntuple(padding, n)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input, indices, output_size=None):
        return self._function(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of MaxPool1d: maxima back at their indices, zeros elsewhere."""

    _nd = 1
    _function = functional_form("max_unpool1d")


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of MaxPool2d: maxima back at their indices, zeros elsewhere."""

    _nd = 2
    _function = functional_form("max_unpool2d")


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of MaxPool3d: maxima back at their indices, zeros elsewhere."""

    _nd = 3
    _function = functional_form("max_unpool3d")


class _FractionalMaxPoolNd(Module):
    """Fractional max pooling over windows at pseudo-random steps (F.fractional_max_pool)."""

    _nd = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        name = type(self).__name__
        self.kernel_size = _ntuple(kernel_size, self._nd)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = None if output_size is None else _ntuple(output_size, self._nd)
        self.output_ratio = None if output_ratio is None else _ntuple(output_ratio, self._nd)
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling "
                             f"ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        pool = getattr(F, f"fractional_max_pool{self._nd}d")
        return pool(input, self.kernel_size, self.output_size, self.output_ratio,
                    self.return_indices, _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """2-D fractional max pooling (windows at pseudo-random steps, Graham 2014)."""

    _nd = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """3-D fractional max pooling (windows at pseudo-random steps, Graham 2014)."""

    _nd = 3
