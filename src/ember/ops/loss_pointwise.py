"""Elementwise regression and likelihood losses: l1, mse, huber, smooth_l1, soft_margin,
binary_cross_entropy_with_logits, kl_div, poisson_nll and gaussian_nll. mse, huber,
smooth_l1, soft_margin and binary_cross_entropy_with_logits run a kernel op of their own
(``_mse_loss``, ... here, the last two in loss_kernels.py), so that the loss is one node
named as PyTorch's (MseLossBackward0) whose edges are the operands; the others are composed
from ember ops. (binary_cross_entropy, whose log is clamped, is an op: loss_bce.py.)"""

import math
import warnings

import numpy as np

from ember import _dtype as D
from ember._warn import user_level
from ember.autograd.grad_mode import no_grad
from ember.ops._loss_common import (fused_loss_grads, reduce_array, reduce_loss, reduced_grad,
                                    reduction_of, refuse_grad, warn_size_mismatch)
from ember.ops._op_errors import broadcast_message, check_broadcast
from ember.ops._promotion import BINARY
from ember.ops._registry import op, rename_node
from ember.ops._scalars import float_arg, rounded_number
from ember.ops.loss_kernels import _binary_cross_entropy_with_logits, _soft_margin_loss
from ember.ops.binary_math import where
from ember.ops.shape import broadcast_tensors

__all__ = ["l1_loss", "mse_loss", "huber_loss", "smooth_l1_loss", "soft_margin_loss",
           "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss",
           "gaussian_nll_loss", "softplus_of"]


def _float_only(dtype, kernel):
    if dtype.category != D.FLOATING or dtype in D.FLOAT8:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtype._torch_name}'")


def _promoted(input, target):
    """The dtype PyTorch's loss kernels compute ``input`` and ``target`` in (bool and integer
    operands take part, so ``mse_loss(x, labels)`` works with integer or bool labels)."""
    return D.result_type_of([(t.dtype, D.DIM if t.ndim else D.ZERO_DIM)
                             for t in (input, target)])


def _into_input_dtype(dtype, input):
    """Check that a loss computed in ``dtype`` fits a tensor of ``input``'s dtype, which is
    where PyTorch writes huber and soft-margin losses (and the target, where it writes
    binary_cross_entropy_with_logits)."""
    if dtype is not input.dtype and not D.can_cast(dtype, input.dtype):
        raise RuntimeError(f"result type {dtype._torch_name} can't be cast to the desired "
                           f"output type {input.dtype._torch_name}")


def _difference(input, target, dtype):
    """``input - target`` in ``dtype`` (a bool operand may not be subtracted as it is)."""
    return input.to(dtype) - target.to(dtype)


def _weighted(loss, input, weight, reduction):
    """``loss`` times an elementwise ``weight`` (of input's size), reduced by its total."""
    if weight is None:
        return reduce_loss(loss, reduction)
    if weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "mean":
        return loss.sum() / weight.sum()
    return reduce_loss(loss, reduction)


def _broadcast_then_reduction(input, target, size_average, reduce, reduction):
    """The checked reduction of a pointwise loss: PyTorch's Python layer broadcasts the
    operands (raising its error) before it reads a reduction string, and before its kernel
    checks a beta or delta."""
    if input.shape != target.shape:
        check_broadcast(input, target)
    return reduction_of(size_average, reduce, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """The mean (or sum) absolute error between ``input`` and ``target``."""
    warn_size_mismatch(input, target)
    reduction = _broadcast_then_reduction(input, target, size_average, reduce, reduction)
    # (broadcast first, as PyTorch: a 0-dim target then takes part in the promotion)
    a, b = _kernel_operands(input, target)
    return _weighted((a - b).abs(), input, weight, reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """The mean (or sum) squared error between ``input`` and ``target``."""
    warn_size_mismatch(input, target)
    reduction = _broadcast_then_reduction(input, target, size_average, reduce, reduction)
    dtype = _promoted(input, target)
    _float_only(dtype, "mse_cpu")
    if weight is not None:             # PyTorch composes this case of other ops too
        return _weighted(_difference(input, target, dtype).square(), input, weight, reduction)
    return _mse_loss(*_kernel_operands(input, target), reduction)


# upcast=False: PyTorch's kernel rounds a 16-bit difference before squaring it (each step
# in the operands' dtype), and the squares before reducing them
@op("_mse_loss(input, target, reduction='mean')", inputs=2, promote=BINARY, method=False,
    out=False, scalars=False, grad_fn_name="MseLossBackward0", upcast=False, pointwise=True)
def _mse_loss(xp, x, t, reduction):
    """PyTorch's mse_loss kernel: the squared error of same-shaped (broadcast) ``input`` and
    ``target``, reduced; one node, MseLossBackward0, whose edges are the two operands."""
    d = x - t
    return reduce_array(xp, d * d, reduction)


@_mse_loss.derivative
def _(grad, x, t, reduction, *, needs=(True, True)):
    # PyTorch's order: norm (2, or 2 / numel, in the operands' dtype) times the difference,
    # then times the incoming gradient; the target's is the same with the difference negated
    norm = 2.0 / x.numel() if reduction == "mean" and x.numel() else 2.0
    dtype = D.promote_types(x.dtype, t.dtype)
    if dtype.itemsize == 2 and dtype.category == D.FLOATING:
        norm = rounded_number(norm, dtype.np)
    g = (x - t) * norm * grad
    # (under create_graph PyTorch's node is its mse_loss_backward's, for both)
    name = "MseLossBackwardBackward0"
    return (rename_node(g, name) if needs[0] else None,
            rename_node(-g, name) if needs[1] else None)


def _huber(diff, delta):
    """``0.5 * d**2`` below ``delta``, ``delta * (|d| - 0.5 * delta)`` above (PyTorch's
    gradient at the boundary: the linear branch's)."""
    z = diff.abs()
    return where(z < delta, 0.5 * z.square(), delta * (z - 0.5 * delta))


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """The Huber loss: squared error below ``delta``, ``delta``-scaled absolute error above."""
    delta = float(float_arg(delta, "huber_loss", "delta", 4))
    warn_size_mismatch(input, target)
    reduction = _broadcast_then_reduction(input, target, None, None, reduction)
    dtype = _promoted(input, target)
    _into_input_dtype(dtype, input)
    _float_only(dtype, "huber_cpu")
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    if weight is not None:             # PyTorch composes this case of other ops
        loss = _huber(_difference(input, target, dtype), delta).to(input.dtype)
        if weight.shape != input.shape:
            raise ValueError("Weights and input must have the same size.")
        return reduce_loss(loss * weight, reduction)
    input, target = _kernel_operands(input, target)
    if dtype is not input.dtype:       # PyTorch's kernel writes the loss in input's dtype
        target = target.to(input.dtype)
    return _huber_loss(input, target, reduction, delta)


def _kernel_operands(input, target):
    """``input`` and ``target`` broadcast to one shape, as PyTorch passes them to its
    pointwise loss kernels."""
    if input.shape != target.shape:
        return broadcast_tensors(input, target)
    return input, target


def _same(a):
    return a


def _huber_array(xp, d, delta, r=_same):
    z = xp.abs(d)
    return xp.where(z < delta, r(r(0.5 * d) * d), r(delta * r(z - 0.5 * delta)))


def _smooth_l1_array(xp, d, beta, r=_same):
    z = xp.abs(d)
    return xp.where(z < beta, r(r(r(0.5 * d) * d) / beta), r(z - 0.5 * beta))


def _pointwise_loss(xp, x, t, reduction, elementwise, parameter, stepwise):
    """A huber-like loss of same-shaped operands, reduced. 16-bit floats: computed in float32
    and rounded once, except that the ``stepwise`` dtype rounds each step (``parameter``
    too) to it, as PyTorch's CPU kernels do (huber's bfloat16 and smooth_l1's float16 one)."""
    dtype = x.dtype
    if dtype.itemsize != 2 or dtype.kind == "i":
        return reduce_array(xp, elementwise(xp, x - t, parameter), reduction)
    wide_x, wide_t = x.astype(np.float32), t.astype(np.float32)
    if dtype == stepwise:       # in float32, rounded after each step (NumPy's float16 is slow)
        def r(a):
            return a.astype(dtype).astype(np.float32)
        loss = elementwise(xp, r(wide_x - wide_t), float(dtype.type(parameter)), r)
        return reduce_array(xp, loss.astype(dtype), reduction)
    return reduce_array(xp, elementwise(xp, wide_x - wide_t, parameter),
                        reduction).astype(dtype)


# upcast=False: _pointwise_loss chooses where 16-bit floats round
@op("_huber_loss(input, target, reduction='mean', delta=1.0)", inputs=2, promote=BINARY,
    method=False, out=False, scalars=False, grad_fn_name="HuberLossBackward0", upcast=False,
    pointwise=True)
def _huber_loss(xp, x, t, reduction, delta):
    """PyTorch's huber_loss kernel on same-shaped operands: squared error below ``delta``,
    ``delta``-scaled absolute error above, reduced."""
    return _pointwise_loss(xp, x, t, reduction, _huber_array, delta, D.bfloat16.np)


def _huber_slope(d, delta):
    """The Huber loss's derivative in ``d``: ``d`` below ``delta``, ``delta * sign(d)`` from
    it on (at the boundary the linear branch's, whose own derivative is 0, as PyTorch's; a
    NaN ``d`` gives NaN, as PyTorch's kernel's quadratic branch)."""
    return where(d.abs() >= delta, delta * d.sign(), d)


@_huber_loss.derivative
def _(grad, x, t, reduction, delta, *, needs=(True, True)):
    # PyTorch's order, each step rounding: the slope times the mean's norm (in the operands'
    # dtype), then the gradient; the target's from t - x, not by negating the input's (a zero
    # keeps its sign)
    def scaled(d):
        slope = _huber_slope(d, delta)
        if reduction == "mean":
            slope = slope * slope.new_full((), 1 / max(x.numel(), 1))
        return rename_node(slope * grad, "HuberLossBackwardBackward0")
    return scaled(x - t) if needs[0] else None, scaled(t - x) if needs[1] else None


@op("_smooth_l1_loss(input, target, reduction='mean', beta=1.0)", inputs=2, promote=BINARY,
    method=False, out=False, scalars=False, grad_fn_name="SmoothL1LossBackward0", upcast=False,
    pointwise=True)
def _smooth_l1_loss(xp, x, t, reduction, beta):
    """PyTorch's smooth_l1_loss kernel on same-shaped operands (``beta`` > 0): the Huber
    loss with delta ``beta``, divided by ``beta``, reduced."""
    return _pointwise_loss(xp, x, t, reduction, _smooth_l1_array, beta, D.float16.np)


@_smooth_l1_loss.derivative
@fused_loss_grads
def _(grad, x, t, reduction, beta, *, needs=(True, True)):
    # in float32 from the unrounded difference; the target's from t - x (see huber's)
    grad = reduced_grad(grad, x, reduction)
    name = "SmoothL1LossBackwardBackward0"
    return (rename_node(grad * (_huber_slope(x - t, beta) / beta), name) if needs[0] else None,
            rename_node(grad * (_huber_slope(t - x, beta) / beta), name) if needs[1] else None)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """The smooth L1 loss: squared error / ``beta`` below ``beta``, absolute error above."""
    beta = float(float_arg(beta, "smooth_l1_loss", "beta", 4))
    warn_size_mismatch(input, target)
    reduction = _broadcast_then_reduction(input, target, size_average, reduce, reduction)
    dtype = _promoted(input, target)
    _float_only(dtype, "smooth_l1_cpu")
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0:                      # PyTorch computes l1_loss then
        return reduce_loss(_difference(input, target, dtype).abs(), reduction)
    return _smooth_l1_loss(*_kernel_operands(input, target), reduction, beta)


def softplus_of(x):
    """``log(1 + exp(x))`` without overflow, with the gradient sigmoid(x) everywhere (a
    split into ``max(x, 0) + log1p(exp(-|x|))`` gives a wrong one at exactly 0)."""
    return x.logaddexp(x.new_zeros(()))


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """The two-class logistic loss ``log(1 + exp(-target * input))``."""
    reduction = reduction_of(size_average, reduce, reduction)
    refuse_grad(target, "soft_margin_loss", "target", forward=True)    # (before its kernel)
    if input.dtype is D.bool_:          # PyTorch's kernel negates the input
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If "
                           "you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")
    dtype = _promoted(input, target)
    if dtype.category < D.FLOATING:
        dtype = D.get_default_dtype()
    _into_input_dtype(dtype, input)
    if input.shape != target.shape:
        _broadcast_into((input.shape, target.shape), input.shape)
    return _soft_margin_loss(input, target, reduction)


def _broadcast_into(shapes, into):
    """PyTorch's errors when operands of ``shapes`` (in its kernel's order) do not broadcast
    to ``into``, the shape the kernel writes: soft_margin's target into the input's shape,
    bce_with_logits' ``pos_weight`` into the target's."""
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise RuntimeError(broadcast_message(list(shapes))) from None
    if shape != into:
        raise RuntimeError(f"output with shape {list(into)} doesn't match the broadcast "
                           f"shape {list(shape)}")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """Binary cross entropy of ``sigmoid(input)``, computed stably from the logits; the loss
    has the target's dtype, which must be floating (PyTorch's kernel writes into it)."""
    reduction = reduction_of(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size (ember.Size({list(target.shape)})) must be the same as "
                         f"input size (ember.Size({list(input.shape)}))")
    # (autograd refuses these before the kernel checks anything)
    refuse_grad(weight, "binary_cross_entropy_with_logits", "weight", forward=True)
    refuse_grad(pos_weight, "binary_cross_entropy_with_logits", "pos_weight", forward=True)
    _float_only(input.dtype, "log_sigmoid_cpu")
    if target.dtype is D.bool_:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    _into_input_dtype(_promoted(input, target), target)
    if pos_weight is not None:
        _broadcast_into((pos_weight.shape, target.shape), target.shape)
    if weight is not None:      # (written into the loss, of the target's shape, in place)
        _broadcast_into((target.shape, weight.shape), target.shape)
    return _binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """The Kullback-Leibler divergence of ``target`` from log-probabilities ``input``."""
    if size_average is not None or reduce is not None:
        reduction = reduction_of(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", UserWarning,
                      stacklevel=user_level(2))
    elif reduction != "batchmean":
        reduction = reduction_of(None, None, reduction)
    if any(not (t.dtype.is_floating_point or t.dtype.is_complex) for t in (input, target)):
        raise RuntimeError("kl_div: Integral inputs not supported.")
    if log_target:
        loss = target.exp() * (target - input)
    else:       # the product first: its node runs last, so the target's gradients add up
        product = target * input        # in PyTorch's order (which shows in 16-bit floats)
        loss = target.xlogy(target) - product
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if input.ndim else total
    return reduce_loss(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """The negative log likelihood of ``target`` under a Poisson of rate ``input``."""
    reduction = reduction_of(size_average, reduce, reduction)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:   # Stirling's approximation of log(target!), only where target > 1
        stirling = target.xlogy(target) - target + 0.5 * (2 * math.pi * target).log()
        loss += where(target > 1, stirling, 0.0)       # (in place: in the loss's dtype)
    return reduce_loss(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """The negative log likelihood of ``target`` under a Gaussian of mean ``input``, variance
    ``var`` (same shape, one dim fewer, or a singleton dim where input's is not)."""
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = input.new_full(input.shape, float(var))
    elif bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = var.unsqueeze(-1)
        elif input.ndim != var.ndim or sum(v for i, v in zip(input.shape, var.shape)
                                           if i != v) != 1:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not valid")
    # clamped for stability, but the gradient flows to var as if it were not (as PyTorch)
    with no_grad():
        lift = var.clamp_min(eps) - var
    var = var + lift
    loss = 0.5 * (var.log() + (input - target).square() / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduce_loss(loss, reduction)
