"""The activation functions of ``nn.functional`` that are Python on top of registered ops:
``inplace=`` keywords, the in-place variants, rrelu, softmax's F signature, softmin,
gumbel_softmax, and the compositions (relu6, softsign, tanhshrink)."""

import warnings

import numpy as np

import ember
from ember import _dtype as D
from ember._random import _rng
from ember._tensor import _make
from ember._transform_births import STATE as _BIRTHS, refuse_captured
from ember._warn import user_level
from ember.backend import on_device_of, xp_of
from ember.ops._inplace import call_inplace
from ember.ops._registry import REGISTRY, rename_node
from ember.ops._scalars import number_arg, real_number

__all__ = ["relu", "relu6", "leaky_relu", "rrelu", "elu", "selu", "celu", "silu", "mish",
           "hardtanh", "hardsigmoid", "hardswish", "threshold", "softsign", "tanhshrink",
           "softmax", "log_softmax", "softmin", "gumbel_softmax"]


def _op(name):
    return REGISTRY[name]


def _apply(name, input, params, inplace, aten=None):
    """The op ``name`` on ``input``, written into ``input`` when ``inplace`` (a call PyTorch
    names ``aten::<aten>_``, by default the op's short name)."""
    if not inplace:
        return _op(name).function(input, *params)
    if _BIRTHS.levels:      # NOTE [Captured tensors]
        refuse_captured(input, f"aten::{aten or name.rpartition('.')[2]}_")
    name, extra = _FROM_RESULT.get(name, (name, ()))
    out = call_inplace(_op(name), (input,), tuple(params) + extra)
    renamed = _INPLACE_NODES.get(type(out._grad_fn).__name__)
    return out if renamed is None else rename_node(out, renamed)


# PyTorch's nodes of these in-place kernels end in 1 (a view's node keeps its own name)
_INPLACE_NODES = {"ThresholdBackward0": "ThresholdBackward1"}

# in-place variants whose gradient PyTorch computes from the result: op, extra parameters
_FROM_RESULT = {"nn.functional.leaky_relu": ("_leaky_relu_inplace", ()),
                "nn.functional.elu": ("_elu_inplace", ("elu",)),
                "selu": ("_elu_inplace", (None, "selu")),
                "celu": ("_elu_inplace", ("celu",))}


# --- rectifiers -------------------------------------------------------------------------------

def relu(input, inplace=False):
    """``max(input, 0)`` elementwise (in place if ``inplace``)."""
    if inplace:
        return relu_(input)
    if not hasattr(input, "relu"):      # the op's TypeError ("must be Tensor, not list")
        return _op("relu").function(input)
    return input.relu()


def relu_(input):
    """``relu`` in place."""
    if not hasattr(input, "relu_"):
        from ember.ops._dims import type_name
        raise TypeError("relu_(): argument 'input' (position 1) must be Tensor, not "
                        f"{type_name(input)}")
    return input.relu_()


def relu6(input, inplace=False):
    """``min(max(input, 0), 6)`` elementwise."""
    return _apply("nn.functional.hardtanh", input, (0.0, 6.0), inplace, "relu6")


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``input`` clamped to ``[min_val, max_val]``."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _apply("nn.functional.hardtanh", input, (min_val, max_val), inplace)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """``hardtanh`` in place."""
    return hardtanh(input, min_val, max_val, inplace=True)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``input`` where positive, else ``negative_slope * input``."""
    return _apply("nn.functional.leaky_relu", input, (negative_slope,), inplace)


def leaky_relu_(input, negative_slope=0.01):
    """``leaky_relu`` in place."""
    return leaky_relu(input, negative_slope, inplace=True)


def threshold(input, threshold, value, inplace=False):
    """``value`` where ``input <= threshold``, else ``input``."""
    return _apply("threshold", input, (threshold, value), inplace)


def threshold_(input, threshold, value):
    """``threshold`` in place."""
    return _apply("threshold", input, (threshold, value), True)


def _rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None,
           inplace=False):
    # (PyTorch's rrelu_with_noise writes a row-major result whatever the input's layout)
    out = _rrelu_values(input if inplace else input.contiguous(), lower, upper, training,
                        generator, inplace)
    # PyTorch computes both modes with its rrelu_with_noise kernel
    return rename_node(out, "RreluWithNoiseBackward1" if inplace else "RreluWithNoiseBackward0")


def _rrelu_values(input, lower, upper, training, generator, inplace):
    lower = real_number(number_arg(lower, "rrelu", "lower", 2), np.float64)
    upper = real_number(number_arg(upper, "rrelu", "upper", 3), np.float64)
    if inplace and _BIRTHS.levels:
        refuse_captured(input, "aten::rrelu_")
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:
        return _apply("nn.functional.leaky_relu", input, ((lower + upper) / 2,), inplace)
    d = input.dtype
    if not d.is_floating_point or d in (D.float8_e4m3fn, D.float8_e5m2):
        raise NotImplementedError(f"\"leaky_relu_cpu\" not implemented for '{d._torch_name}'")
    if d is D.float16 and input.device.type == "cpu":     # (its CPU kernel lacks float16)
        raise NotImplementedError("\"rrelu_with_noise_out_cpu\" not implemented for 'Half'")
    a = input._data
    slopes = on_device_of(_rng(generator).uniform(lower, upper, a.shape), a)
    noise = _make(xp_of(a).where(a <= 0, slopes, 1.0).astype(a.dtype))
    from ember.ops.dropout import masked_scale
    return masked_scale(input, noise, 1.0, inplace)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """leaky_relu with a random slope from U(lower, upper) per element when training, the
    mean slope otherwise."""
    return _rrelu(input, lower, upper, training, generator)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """``rrelu`` in place."""
    return _rrelu(input, lower, upper, training, generator, inplace=True)


def _f_rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """leaky_relu with a random slope from U(lower, upper) per element when training, the
    mean slope otherwise."""
    return _rrelu(input, lower, upper, training, None, inplace)


def _f_rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """``rrelu`` in place."""
    return _rrelu(input, lower, upper, training, None, inplace=True)


# --- smooth activations with an inplace= keyword ----------------------------------------------

def elu(input, alpha=1.0, inplace=False):
    """``input`` where positive, else ``alpha * (exp(input) - 1)``."""
    return _apply("nn.functional.elu", input, (alpha,), inplace)


def elu_(input, alpha=1.0):
    """``elu`` in place."""
    return elu(input, alpha, inplace=True)


def selu(input, inplace=False):
    """``scale * elu(input, alpha)`` with the self-normalizing constants."""
    return _apply("selu", input, (), inplace)


def selu_(input):
    """``selu`` in place."""
    return _apply("selu", input, (), True)


def celu(input, alpha=1.0, inplace=False):
    """``max(0, input) + min(0, alpha * (exp(input / alpha) - 1))``."""
    return _apply("celu", input, (alpha,), inplace)


def celu_(input, alpha=1.0):
    """``celu`` in place."""
    return _apply("celu", input, (alpha,), True)


def silu(input, inplace=False):
    """``input * sigmoid(input)``."""
    return _apply("nn.functional.silu", input, (), inplace)


def mish(input, inplace=False):
    """``input * tanh(softplus(input))``."""
    return _apply("nn.functional.mish", input, (), inplace)


def hardsigmoid(input, inplace=False):
    """``relu6(input + 3) / 6``."""
    return _apply("nn.functional.hardsigmoid", input, (), inplace)


def hardswish(input, inplace=False):
    """``input * relu6(input + 3) / 6``."""
    return _apply("nn.functional.hardswish", input, (), inplace)


def softsign(input):
    """``input / (1 + |input|)``."""
    return input / (input.abs() + 1)


def tanhshrink(input):
    """``input - tanh(input)``."""
    return input - input.tanh()


# PyTorch's F.sigmoid and F.tanh take only the input (no ``out=``, unlike torch.sigmoid)

def sigmoid(input):
    """``1 / (1 + exp(-input))``, elementwise."""
    return input.sigmoid()


def tanh(input):
    """The hyperbolic tangent, elementwise."""
    return input.tanh()


# --- softmax and friends ----------------------------------------------------------------------

def _softmax_dim(name, ndim, stacklevel):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  f"to include dim=X as an argument.", stacklevel=user_level(stacklevel))
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``exp(input)`` normalized to sum to 1 along ``dim``."""
    if dim is None:
        dim = _softmax_dim("softmax", input.dim(), _stacklevel)
    return input.softmax(dim, dtype=dtype)      # the method's argument errors, as PyTorch


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """The logarithm of ``softmax`` along ``dim``."""
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim(), _stacklevel)
    return input.log_softmax(dim, dtype=dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-input)`` along ``dim``."""
    if dim is None:
        dim = _softmax_dim("softmin", input.dim(), _stacklevel)
    return (-input).softmax(dim, dtype=dtype)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """A sample of the Gumbel-softmax distribution (one-hot, with a straight-through
    gradient, when ``hard``)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.",
                      stacklevel=user_level(2))
    # exponential_ brings PyTorch's dtype check, the device's generator and vmap's randomness
    gumbels = -ember.empty_like(logits, memory_format=ember.contiguous_format).exponential_().log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = ember.zeros_like(logits, memory_format=ember.contiguous_format)
    y_hard = y_hard.scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


FUNCTIONAL = {
    "relu": relu, "relu_": relu_, "relu6": relu6, "hardtanh": hardtanh,
    "hardtanh_": hardtanh_, "leaky_relu": leaky_relu, "leaky_relu_": leaky_relu_,
    "threshold": threshold, "threshold_": threshold_, "rrelu": _f_rrelu, "rrelu_": _f_rrelu_,
    "elu": elu, "elu_": elu_, "selu": selu, "selu_": selu_, "celu": celu, "celu_": celu_,
    "silu": silu, "mish": mish, "hardsigmoid": hardsigmoid, "hardswish": hardswish,
    "softsign": softsign, "tanhshrink": tanhshrink, "prelu": "prelu", "hardshrink": "hardshrink",
    "softmax": softmax, "log_softmax": log_softmax, "softmin": softmin,
    "gumbel_softmax": gumbel_softmax, "sigmoid": sigmoid, "tanh": tanh,
}
_f_rrelu.__name__, _f_rrelu_.__name__ = "rrelu", "rrelu_"

PUBLIC = {"relu_": relu_, "rrelu": rrelu, "rrelu_": rrelu_, "selu_": selu_, "celu_": celu_,
          "threshold_": threshold_}
