"""Activation layers: thin modules over ember.nn.functional."""

import warnings

import ember
from ember.nn import functional as F
from ember.nn.modules._functional_form import functional_form
# PyTorch defines MultiheadAttention in activation.py, and libraries import it from there
from ember.nn.modules.attention import (MultiheadAttention,  # noqa: F401
                                        NonDynamicallyQuantizableLinear)
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter

__all__ = ["ReLU", "ReLU6", "LeakyReLU", "PReLU", "RReLU", "ELU", "SELU", "CELU", "GELU",
           "SiLU", "Mish", "Sigmoid", "Tanh", "Hardtanh", "Hardsigmoid", "Hardswish",
           "Softplus", "Softsign", "Softshrink", "Hardshrink", "Tanhshrink", "Threshold", "GLU",
           "LogSigmoid", "Softmax", "LogSoftmax", "Softmin", "Softmax2d"]


def _inplace_text(inplace, lead=""):
    return f"{lead}inplace=True" if inplace else ""


class _Inplace(Module):
    """An activation with only an ``inplace`` flag, computed by ``_fn``."""

    _fn = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input, inplace=self.inplace)

    def extra_repr(self):
        return _inplace_text(self.inplace)


class _Plain(Module):
    """A parameterless activation computed by ``_fn``."""

    _fn = None

    def forward(self, input):
        return type(self)._fn(input)


class ReLU(_Inplace):
    """``max(0, x)`` elementwise."""

    _fn = functional_form("relu")


class SELU(_Inplace):
    """The self-normalizing ELU."""

    _fn = functional_form("selu")


class SiLU(_Inplace):
    """``x * sigmoid(x)``."""

    _fn = functional_form("silu")


class Mish(_Inplace):
    """``x * tanh(softplus(x))``."""

    _fn = functional_form("mish")


class Hardsigmoid(_Inplace):
    """``relu6(x + 3) / 6``."""

    _fn = functional_form("hardsigmoid")

    def extra_repr(self):
        return ""


class Hardswish(_Inplace):
    """``x * relu6(x + 3) / 6``."""

    _fn = functional_form("hardswish")

    def extra_repr(self):
        return ""


class Sigmoid(_Plain):
    """The logistic sigmoid."""

    _fn = functional_form("sigmoid")


class Tanh(_Plain):
    """The hyperbolic tangent."""

    _fn = functional_form("tanh")


class Softsign(_Plain):
    """``x / (1 + |x|)``."""

    _fn = functional_form("softsign")


class Tanhshrink(_Plain):
    """``x - tanh(x)``."""

    _fn = functional_form("tanhshrink")


class LogSigmoid(_Plain):
    """``log(sigmoid(x))``."""

    _fn = functional_form("logsigmoid")


class Hardtanh(Module):
    """``x`` clamped to ``[min_val, max_val]``."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None,
                 max_value=None):
        super().__init__()
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and renamed to `min_val`",
                          FutureWarning, stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and renamed to `max_val`",
                          FutureWarning, stacklevel=2)
            max_val = max_value
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace
        if self.max_val <= self.min_val:
            raise AssertionError(f"max_val ({max_val}) must be greater than min_val ({min_val})")

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + \
            _inplace_text(self.inplace, ", ")


class ReLU6(Hardtanh):
    """``min(max(0, x), 6)``."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return _inplace_text(self.inplace)


class LeakyReLU(Module):
    """``x`` where positive, else ``negative_slope * x``."""

    def __init__(self, negative_slope=1e-2, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + _inplace_text(self.inplace, ", ")


class PReLU(Module):
    """leaky_relu with a learned slope per channel (or one shared slope)."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(ember.empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        with ember.no_grad():
            self.weight.fill_(self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    """leaky_relu with a random slope from U(lower, upper) in training, the mean in eval."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + _inplace_text(self.inplace, ", ")


class ELU(Module):
    """``x`` where positive, else ``alpha * (exp(x) - 1)``."""

    _fn = functional_form("elu")

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + _inplace_text(self.inplace, ", ")


class CELU(ELU):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""

    _fn = functional_form("celu")


class GELU(Module):
    """``x * Phi(x)``, or its tanh approximation."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``, linear above ``threshold``."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softshrink(Module):
    """``x`` moved ``lambd`` towards 0, 0 inside ``[-lambd, lambd]``."""

    _fn = functional_form("softshrink")

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return type(self)._fn(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Hardshrink(Softshrink):
    """0 inside ``[-lambd, lambd]``, else ``x``."""

    _fn = functional_form("hardshrink")


class Threshold(Module):
    """``value`` where ``x <= threshold``, else ``x``."""

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + \
            _inplace_text(self.inplace, ", ")


class GLU(Module):
    """The gated linear unit along ``dim``."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(Module):
    """``exp(x)`` normalized along ``dim``."""

    _fn = functional_form("softmax")

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return type(self)._fn(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """The logarithm of softmax along ``dim``."""

    _fn = functional_form("log_softmax")


class Softmin(Softmax):
    """softmax of ``-x`` along ``dim``."""

    _fn = functional_form("softmin")


class Softmax2d(Module):
    """softmax over the channels of each spatial location."""

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D "
                             f"instead")
        return F.softmax(input, -3, _stacklevel=5)
