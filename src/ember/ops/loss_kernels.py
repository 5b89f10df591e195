"""The kernels of soft_margin_loss, binary_cross_entropy_with_logits, multi_margin_loss and
multilabel_margin_loss: one op each, so that the loss is one node named as PyTorch's
(SoftMarginLossBackward0, ...) whose edges are the operands. The public functions (with
their argument checks) are in loss_pointwise.py and loss_margin.py."""

from ember._tensor import Tensor, _make
from ember.autograd.grad_mode import no_grad
from ember.backend import xp_of
from ember.ops._linalg_utils import check_kernel, torch_name
from ember.ops._loss_common import promoted_dtype, reduce_array
from ember.ops._registry import op, rename_node
from ember.ops.activations_smooth import logsigmoid
from ember.ops.arithmetic import _div_scalar, _sub_scalar
from ember.ops.binary_math import where
from ember.ops.random_nodes import NOT_IMPLEMENTED, sampled
from ember.ops.underivable import on_values

__all__ = ["_soft_margin_loss", "_binary_cross_entropy_with_logits", "_multi_margin_loss",
           "_multilabel_margin_loss"]


# --- soft_margin_loss -------------------------------------------------------------------------

@op("_soft_margin_loss(input, target, reduction='mean')", inputs=2, method=False, out=False,
    scalars=False, grad_fn_name="SoftMarginLossBackward0")
def _soft_margin_loss(xp, x, t, reduction):
    """``log1p(exp(-input * target))``, computed in the operands' promoted dtype (each step
    rounding, 16-bit floats too; overflowing to inf, as PyTorch's) and written in the
    input's, reduced."""
    dtype, compute = promoted_dtype(x, t)
    # -input * target, not input * -target: an unsigned target must not wrap around
    product = -x.astype(dtype) * t.astype(dtype)
    # (exp in float32: NumPy's float16 exp misrounds a few values)
    loss = xp.log1p(xp.exp(product.astype(compute)).astype(dtype))
    return reduce_array(xp, loss.astype(x.dtype), reduction, like=x)


_soft_margin_loss.refuse_grad("target", "soft_margin_loss", forward=True)


_soft_margin_loss.nondifferentiable("target")


@_soft_margin_loss.derivative
def _(grad, x, t, reduction):
    # PyTorch's order, each step rounding: -t * z * norm / (1 + z) * grad, z = exp(-x * t)
    z = ((-x) * t).exp()
    slope = -(t * z)        # (an unsigned target must not wrap around, as in the forward)
    if reduction == "mean":
        slope = slope * slope.new_full((), 1 / max(x.numel(), 1))
    return slope / (1 + z) * grad, None


# --- binary_cross_entropy_with_logits ---------------------------------------------------------

@op("_binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, "
    "reduction='mean')", inputs=4, method=False, out=False, scalars=False,
    grad_fn_name="BinaryCrossEntropyWithLogitsBackward0")
def _binary_cross_entropy_with_logits(xp, x, t, w, pw, reduction):
    """``(1 - t) * x - (1 + (pw - 1) * t) * log_sigmoid(x)``, times ``weight``, written in
    the target's dtype, reduced: each step rounds in the promoted dtype (16-bit floats too,
    whose log_sigmoid is computed in float32), as PyTorch's."""
    # PyTorch's steps: log_sigmoid(input) in the input's dtype (16-bit floats computed in
    # float32), times the pos_weight factor in place; then ``(1 - target)`` and the rest
    # written into it in place, so each step rounds to the target's dtype
    xdt, tdt = x.dtype, t.dtype
    wide = x.astype(promoted_dtype(x)[1])
    log_sigmoid = (xp.minimum(wide, 0) - xp.log1p(xp.exp(-xp.abs(wide)))).astype(xdt)
    if pw is not None:
        factor = (pw - pw.dtype.type(1)) * t + 1
        log_sigmoid = (log_sigmoid * factor).astype(xdt)
    loss = ((1 - t).astype(tdt) * x).astype(tdt)
    loss = (loss - log_sigmoid).astype(tdt)
    if w is not None:
        loss = (loss * w).astype(tdt)
    # (PyTorch computes ``1 - target`` first and writes the rest into it: laid out as the
    # target passed, not as its copy, which NumPy lays out otherwise where it is expanded)
    return reduce_array(xp, loss, reduction, like=t)


for _name in ("weight", "pos_weight"):
    _binary_cross_entropy_with_logits.refuse_grad(_name, "binary_cross_entropy_with_logits",
                                                  forward=True)


def _constant_weights(flat):
    """Whether neither weight records: no edges for them, as PyTorch's node has none (a
    forward-mode transform's tangent in them needs theirs, see ``grad_refused``). Reads the
    flags, which a leaf may change before backward: they are the last inputs, so that only
    adds or drops trailing gradients, which the engine reads by edge."""
    return not any(isinstance(w, Tensor) and (w._requires_grad or w._grad_fn is not None)
                   for w in flat[2:])


_binary_cross_entropy_with_logits.nondifferentiable_when(_constant_weights, "weight",
                                                         "pos_weight")


@_binary_cross_entropy_with_logits.derivative
def _(grad, x, t, w, pw, reduction, *, needs=(True, True, True, True)):
    # PyTorch's order, each step rounding: the slope times grad, then the weight, then the
    # mean's division; weight and pos_weight are reached by forward-mode transforms alone
    # (refused when they require grad), whose tangents PyTorch's forward formula carries
    grad_x = grad_t = grad_w = grad_pw = None
    if (needs[2] and w is not None) or (needs[3] and pw is not None):
        softplus = (-x).logaddexp(x.new_zeros(()))      # -log_sigmoid(x)
    if needs[2] and w is not None:      # d/dw: the unweighted loss
        scale = 1 if pw is None else 1 + (pw - 1) * t
        grad_w = _weighted_mean(((1 - t) * x + scale * softplus) * grad, None, reduction, x)
        grad_w = grad_w.sum_to_size(w.shape)
    if needs[3] and pw is not None:     # d/dpw: -t log_sigmoid(x)
        grad_pw = _weighted_mean(t * softplus * grad, w, reduction, x).sum_to_size(pw.shape)
    if needs[0]:        # d/dx: (pw t + 1 - t) sigmoid(x) - pw t, or sigmoid(x) - t
        if pw is None:
            grad_x = (x.sigmoid() - t) * grad
        else:           # (``+ 1``, a Scalar's add: AddBackward1, one edge, as PyTorch's)
            scale = rename_node(_sub_scalar(pw * t, -1), "AddBackward1") - t
            grad_x = (scale * x.sigmoid() - pw * t) * grad
    if needs[1]:        # d/dt: -x - (pw - 1) log_sigmoid(x) = log_sigmoid(-x) - pw log_sigmoid(x)
        if pw is None:
            grad_t = -x * grad
        else:           # (PyTorch's form, rounding as its)
            grad_t = (logsigmoid(-x) - logsigmoid(x) * pw) * grad
    return _weighted_mean(grad_x, w, reduction, x), _weighted_mean(grad_t, w, reduction, x), \
        grad_w, grad_pw


def _weighted_mean(g, w, reduction, x):
    """A loss kernel's gradient ``g`` times the weight, divided by the count for a mean."""
    if g is None:
        return None
    if w is not None:
        g = g * w
    # PyTorch divides by the count as a Scalar: DivBackward1 under create_graph
    return _div_scalar(g, max(x.numel(), 1)) if reduction == "mean" else g


# --- multi_margin_loss ------------------------------------------------------------------------

def _rows(x):
    """Input (C,) or (N, C) as (N, C), and C."""
    c = x.shape[-1] if x.ndim else 1
    return x.reshape(-1, c), c


@op("_multi_margin_loss(input, target, weight=None, p=1, margin=1.0, reduction='mean')",
    inputs=3, method=False, out=False, scalars=False, grad_fn_name="MultiMarginLossBackward0")
def _multi_margin_loss(xp, x, y, w, p, margin, reduction):
    """``sum_i max(0, margin - x[y] + x[i])**p * weight[y] / C`` over i != y, per sample
    (checked class-index target), reduced; an unbatched loss has the target's shape."""
    if not x.size:          # (PyTorch's kernel returns before checking dtypes)
        return reduce_array(xp, xp.zeros(x.shape[:-1], x.dtype), reduction)
    check_kernel(x, "multi_margin_loss_cpu_kernel", "f")    # 16-bit floats raise too
    if w is not None and w.dtype != x.dtype:
        raise RuntimeError(f"expected scalar type {torch_name(x)} but found {torch_name(w)}")
    rows, c = _rows(x)
    if y.size and ((y < 0) | (y >= c)).any():
        raise RuntimeError("target out of range")
    dtype, compute = promoted_dtype(x, w)
    rows, yy = rows.astype(compute), y.reshape(-1, 1)
    margins = margin - xp.take_along_axis(rows, yy, 1) + rows
    # (PyTorch's kernel adds the terms that are > 0: a NaN one is skipped, not propagated)
    margins = xp.where(margins > 0, margins, 0)
    if p == 2:
        margins = margins * margins
    if w is not None:
        margins = margins * w.astype(compute)[yy]
    margins = xp.where(xp.arange(c) != yy, margins, 0)      # the target's own term is 0
    loss = (margins.sum(1) / c).astype(dtype)
    return reduce_array(xp, loss if x.ndim == 2 else loss.reshape(y.shape), reduction)


_multi_margin_loss.refuse_grad("weight", "multi_margin_loss")


_multi_margin_loss.nondifferentiable("target", "weight")


_multi_margin_loss.refuse_forward_ad("multi_margin_loss")


@_multi_margin_loss.derivative
def _(grad, x, y, w, p, margin, reduction):
    if not x.numel():       # (whatever the target's dtype, as the forward)
        return x.new_zeros(x.shape), None, None
    rows, c = _rows(x)
    yy = y.reshape(-1, 1)
    own = _make(xp_of(yy._data).arange(c) == yy._data)
    margins = margin - rows.gather(1, yy) + rows
    if p == 1:          # piecewise linear: a constant slope (an array), through x
        slope = where((margins > 0) & ~own, 1.0, 0.0).to(rows.dtype)   # (not float32)
    else:
        slope = where((margins > 0) & ~own, 2 * margins, 0.0)
    if w is not None:
        slope = slope * w[yy]
    # each other class's term pulls the target's logit down by as much
    slope = (slope - where(own, slope.sum(1, keepdim=True), 0.0)) / c
    return _per_row(grad, rows, reduction, slope, x, "multi_margin_loss_backward"), None, None


def _per_row(grad, rows, reduction, slope, x, kernel):
    """The input's gradient: each sample's incoming gradient times its row of ``slope``.
    PyTorch's backward ``kernel`` has no derivative: under create_graph the gradient hangs
    from a NotImplemented node over the incoming gradient and the input, refusing the next
    backward in PyTorch's words."""
    n = rows.shape[0]
    with no_grad():
        g = (grad / max(n, 1) if reduction == "mean" else grad).reshape(-1, 1)
        value = (g.expand(rows.shape) * slope).reshape(x.shape)
    return on_values(lambda ts, v: sampled(ts, v, NOT_IMPLEMENTED, kernel), [grad, x], value)


# --- multilabel_margin_loss -------------------------------------------------------------------

def _label_pairs(xp, rows, t):
    """(pairs, safe) for (N, C) ``rows`` and target: ``pairs[n, j, i]`` where target j is
    listed (before the first -1) and class i is no target; ``safe``: targets, 0 unlisted."""
    listed = xp.cumprod(t != -1, axis=1).astype(bool)
    safe = xp.where(listed, t, 0)
    is_target = xp.zeros(rows.shape, bool)
    index = xp.broadcast_to(xp.arange(rows.shape[0])[:, None], rows.shape)
    is_target[index[listed], safe[listed]] = True
    return listed[:, :, None] & ~is_target[:, None, :], safe


def _hinges(xp, rows, safe):
    """``1 - (x[y_j] - x[i])`` for each (n, j, i)."""
    return 1 - xp.take_along_axis(rows, safe, 1)[:, :, None] + rows[:, None, :]


@op("_multilabel_margin_loss(input, target, reduction='mean')", inputs=2, method=False,
    out=False, scalars=False, grad_fn_name="MultilabelMarginLossBackward0")
def _multilabel_margin_loss(xp, x, t, reduction):
    """``sum max(0, 1 - (x[y_j] - x[i])) / C`` over listed targets j and non-target classes
    i, per sample (checked target), reduced."""
    if not x.size:          # (PyTorch's kernel returns before checking dtypes)
        return reduce_array(xp, xp.zeros(x.shape[:-1], x.dtype), reduction)
    check_kernel(x, "multilabel_margin_loss_forward_out_frame", "f")
    rows, c = _rows(x)
    pairs, safe = _label_pairs(xp, rows, t.reshape(rows.shape))
    hinge = _hinges(xp, rows, safe)
    hinge = xp.where(hinge > 0, hinge, 0)       # (a NaN term skipped, as PyTorch's kernel)
    loss = xp.where(pairs, hinge, 0).sum((1, 2)) / c
    return reduce_array(xp, loss if x.ndim == 2 else loss.reshape(()), reduction)


_multilabel_margin_loss.refuse_grad("target", "multilabel_margin_loss")


_multilabel_margin_loss.nondifferentiable("target")


_multilabel_margin_loss.refuse_forward_ad("multilabel_margin_loss_forward")


@_multilabel_margin_loss.derivative
def _(grad, x, t, reduction):
    rows, c = _rows(x)
    xa = rows._data
    xp = xp_of(xa)
    pairs, safe = _label_pairs(xp, xa, t._data.reshape(xa.shape))
    active = (pairs & (_hinges(xp, xa, safe) > 0)).astype(xa.dtype)       # (n, j, i)
    # +1 for each non-target class i of an active pair, -1 for its target class y_j
    per_target = active.sum(2)[:, :, None] * (safe[:, :, None] == xp.arange(c))
    slope = (active.sum(1) - per_target.sum(1)) / c
    return (_per_row(grad, rows, reduction, _make(slope), x,
                     "multilabel_margin_loss_backward"), None)
