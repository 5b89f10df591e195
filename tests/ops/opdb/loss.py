"""OpInfo entries for the loss ops with kernels of their own: cross_entropy, nll_loss,
binary_cross_entropy, the kernels of mse_loss, huber_loss and smooth_l1_loss, and ctc_loss
(and its gradient op). The losses composed from other ops are tested in
tests/nn/test_loss_functional.py."""

import itertools

import numpy as np

import ember
from tests.ops.opdb.core import FLOATS, LOW, ErrorInput, OpInfo, SampleInput, make

_REDUCTIONS = ("none", "mean", "sum")


def _index(values, dtype=ember.int64):
    return ember.tensor(values, dtype=dtype)


# --- references -------------------------------------------------------------------------------

def _reduce(loss, reduction, denominator=None):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.asarray(loss.sum())
    total = loss.sum()
    return np.asarray(total / (loss.size if denominator is None else denominator))


def _class_last(x):
    """(positions, C) rows of an input with classes at dim 1 (dim 0 when 1-D)."""
    if x.ndim == 1:
        return x[None]
    return np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])


def _log_softmax(rows):
    shifted = rows - rows.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def _nll_ref(x, target, weight=None, ignore_index=-100, reduction="mean", smoothing=0.0,
             log_softmax=False):
    rows = _class_last(x.astype(np.float64))
    logp = _log_softmax(rows) if log_softmax else rows
    c = rows.shape[1]
    w = np.ones(c) if weight is None else weight.astype(np.float64)
    shape = target.shape
    loss, weights = [], []
    for row, t in zip(logp, target.reshape(-1)):
        if t == ignore_index:
            loss.append(0.0)
            weights.append(0.0)
            continue
        value = -(1 - smoothing) * w[t] * row[t] - smoothing / c * (w * row).sum()
        loss.append(value)
        weights.append(w[t])
    loss = np.array(loss).reshape(shape)
    return _reduce(loss, reduction, np.sum(weights))


def _ce_ref(x, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
            reduction="mean", label_smoothing=0.0):
    if x.shape == target.shape:
        rows, c = _class_last(x.astype(np.float64)), x.shape[1 if x.ndim > 1 else 0]
        q = _class_last(target.astype(np.float64)) * (1 - label_smoothing) + label_smoothing / c
        if weight is not None:
            q = q * weight
        loss = -(_log_softmax(rows) * q).sum(-1).reshape(x.shape[:1] + x.shape[2:]
                                                        if x.ndim > 1 else ())
        return _reduce(loss, reduction)
    return _nll_ref(x, target, weight, ignore_index, reduction, label_smoothing, True)


def _nll_loss_ref(x, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean"):
    return _nll_ref(x, target, weight, ignore_index, reduction)


def _bce_ref(x, t, weight=None, size_average=None, reduce=None, reduction="mean"):
    x, t = x.astype(np.float64), t.astype(np.float64)
    with np.errstate(divide="ignore"):
        loss = -(t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log(1 - x), -100))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _collapse(path, blank):
    out = []
    for i, c in enumerate(path):
        if c != blank and (i == 0 or c != path[i - 1]):
            out.append(c)
    return out


def _ctc_paths(lp, labels, blank):
    """(probability of the labels, per (t, c) the probability of the paths through c at t),
    by enumerating every alignment: an independent reference for small T and C."""
    t_len, c = lp.shape
    total, through = 0.0, np.zeros((t_len, c))
    for path in itertools.product(range(c), repeat=t_len):
        if _collapse(path, blank) == list(labels):
            p = np.exp(sum(lp[t, k] for t, k in enumerate(path)))
            total += p
            for t, k in enumerate(path):
                through[t, k] += p
    return total, through


def _ctc_batch(lp, targets, input_lengths, target_lengths):
    lp = lp.astype(np.float64)
    if lp.ndim == 2:
        return lp[:, None], targets.reshape(1, -1), [int(input_lengths)], [int(target_lengths)]
    in_len, tg_len = list(np.atleast_1d(input_lengths)), list(np.atleast_1d(target_lengths))
    if targets.ndim == 1:
        offsets = np.cumsum([0] + tg_len[:-1])
        targets = [targets[o:o + n] for o, n in zip(offsets, tg_len)]
    return lp, targets, in_len, tg_len


def _ctc_ref(lp, targets, input_lengths, target_lengths, blank=0, reduction=0,
             zero_infinity=False):
    unbatched = lp.ndim == 2
    lp, targets, in_len, tg_len = _ctc_batch(lp, targets, input_lengths, target_lengths)
    losses = []
    for n in range(lp.shape[1]):
        total, _ = _ctc_paths(lp[:in_len[n], n], targets[n][:tg_len[n]], blank)
        loss = -np.log(total) if total > 0 else np.inf
        losses.append(0.0 if zero_infinity and np.isinf(loss) else loss)
    losses = np.array(losses)
    if reduction == 1:
        return np.asarray((losses / np.maximum(tg_len, 1)).mean())
    if reduction == 2:
        return np.asarray(losses.sum())
    return losses.reshape(()) if unbatched else losses


def _ctc_grad_ref(grad, lp, targets, input_lengths, target_lengths, blank, reduction):
    shape = lp.shape
    lp, targets, in_len, tg_len = _ctc_batch(lp, targets, input_lengths, target_lengths)
    out = np.zeros(lp.shape)
    n_batch = lp.shape[1]
    grad = np.broadcast_to(np.asarray(grad, np.float64).reshape(-1), (n_batch,)) \
        if reduction != "none" else np.asarray(grad, np.float64).reshape(n_batch)
    for n in range(n_batch):
        t_len = in_len[n]
        total, through = _ctc_paths(lp[:t_len, n], targets[n][:tg_len[n]], blank)
        g = grad[n] / (n_batch * max(tg_len[n], 1)) if reduction == "mean" else grad[n]
        out[:t_len, n] = (np.exp(lp[:t_len, n]) - through / total) * g
    return out.reshape(shape)


# --- samples ----------------------------------------------------------------------------------

def _ce_samples(probabilities=True):
    def samples(dtype, requires_grad):
        def x(*shape, **kw):
            return make(shape, dtype, requires_grad, low=-3, high=3, **kw)
        w = make((5,), dtype, low=0.1, high=2)
        for reduction in _REDUCTIONS:
            yield SampleInput(x(4, 5), (_index([1, 0, 4, 2]),), {"reduction": reduction})
            yield SampleInput(x(2, 5, 3), (_index([[0, 4, 2], [1, 1, -100]]),),
                              {"weight": w, "reduction": reduction}, name="kdim_weight")
            yield SampleInput(x(3, 5, noncontiguous=True), (_index([2, 1, 3], ember.uint8),),
                              {"weight": w, "ignore_index": 1, "reduction": reduction},
                              name="noncontiguous_byte_ignore")
            yield SampleInput(x(5), (_index(3),), {"reduction": reduction}, name="unbatched")
            yield SampleInput(x(0, 5), (_index([]),), {"reduction": reduction}, name="empty")
            if not requires_grad:   # rows far apart: a shift per row, large logits
                far = x(3, 5) + ember.tensor([[0.0], [-300.0], [100.0]], dtype=dtype)
                yield SampleInput(far, (_index([1, 2, 3]),), {"reduction": reduction},
                                  name="far_apart_rows")
            if probabilities:
                yield SampleInput(x(2, 5, 2), (make((2, 5, 2), dtype, requires_grad, low=0,
                                                    high=1),),
                                  {"weight": w, "reduction": reduction,
                                   "label_smoothing": 0.2}, name="probabilities")
                yield SampleInput(x(2, 5, 3), (_index([[0, 4, 2], [1, 1, 3]]),),
                                  {"weight": w, "ignore_index": 1, "reduction": reduction,
                                   "label_smoothing": 0.3}, name="smoothing")
    return samples


def _ce_errors(name):
    def errors():
        x = make((3, 5), ember.float32)
        yield ErrorInput(SampleInput(x, (_index([1, 10, 2]),)), IndexError,
                         r"^Target 10 is out of bounds\.$")
        yield ErrorInput(SampleInput(x, (_index([1, -1, 2]),)), IndexError,
                         r"Target -1 is out of bounds\.")
        yield ErrorInput(SampleInput(x, (_index([1, 2]),)), ValueError,
                         r"Expected input batch_size \(3\) to match target batch_size \(2\)\.")
        yield ErrorInput(SampleInput(x, (_index([1, 2, 3], ember.int32),)), RuntimeError,
                         "expected target dtype to be Long or Byte, but got Int")
        yield ErrorInput(SampleInput(x, (_index([1, 2, 3]),), {"weight": ember.ones(4)}),
                         RuntimeError, r"weight tensor should be defined either for all 5 "
                         r"classes or no classes but got weight tensor of shape: \[4\]")
        yield ErrorInput(SampleInput(x, (_index([1, 2, 3]),),
                                     {"weight": ember.ones(5, dtype=ember.float64)}),
                         RuntimeError, "expected scalar type Float but found Double")
        yield ErrorInput(SampleInput(x, (_index([1, 2, 3]),), {"reduction": "avg"}),
                         ValueError, "avg is not a valid value for reduction")
        yield ErrorInput(SampleInput(make((2, 3, 4), ember.float32),
                                     (_index([[0, 1, 2, 1], [0, 0, 0, 0], [1, 1, 1, 1]]),)),
                         ValueError, r"Expected input batch_size \(2\) to match target "
                         r"batch_size \(3\)\.")
        yield ErrorInput(SampleInput(make((2, 3, 4), ember.float32),
                                     (_index([[0, 1, 2, 1, 0], [0, 0, 0, 0, 0]]),)),
                         RuntimeError, r"Expected target size \[2, 4\], got \[2, 5\]")
        if name == "cross_entropy":
            yield ErrorInput(SampleInput(x, (_index([1, 2, 3]),), {"label_smoothing": 1.5}),
                             RuntimeError, r"label_smoothing must be between 0\.0 and 1\.0\. "
                             r"Got: 1\.5")
            yield ErrorInput(SampleInput(x, (make((3, 4), ember.float32),)), RuntimeError,
                             "0D or 1D target tensor expected, multi-target not supported")
            yield ErrorInput(SampleInput(make((), ember.float32), (_index(1),)), RuntimeError,
                             "Expected floating point type for target with class "
                             "probabilities, got Long")
        else:
            yield ErrorInput(SampleInput(make((), ember.float32), (_index(1),)), ValueError,
                             r"Expected 1 or more dimensions \(got 0\)")
    return errors


def _bce_samples(dtype, requires_grad):
    def p(*shape, **kw):
        return make(shape, dtype, requires_grad, low=0.05, high=0.95, **kw)
    for reduction in _REDUCTIONS:
        yield SampleInput(p(3, 4), (p(3, 4),), {"reduction": reduction})
        yield SampleInput(p(3, 4), (p(3, 4),), {"weight": make((4,), dtype, low=0.1, high=2),
                                                "reduction": reduction}, name="weight")
        yield SampleInput(p(3, 4, noncontiguous=True), (p(3, 4),), {"reduction": reduction},
                          name="noncontiguous")
        yield SampleInput(p(), (p(),), {"reduction": reduction}, name="0-dim")
        yield SampleInput(p(0, 2), (p(0, 2),), {"reduction": reduction}, name="empty")
    yield SampleInput(ember.tensor([0.0, 1.0, 0.5], dtype=dtype),
                      (ember.tensor([0.5, 0.5, 1.0], dtype=dtype),), name="log_clamped")


def _bce_errors():
    x = make((3, 4), ember.float32, low=0, high=1)
    yield ErrorInput(SampleInput(x, (make((4,), ember.float32, low=0, high=1),)), ValueError,
                     r"Using a target size \(ember\.Size\(\[4\]\)\) that is different to the "
                     r"input size \(ember\.Size\(\[3, 4\]\)\) is deprecated")
    yield ErrorInput(SampleInput(x, (make((3, 4), ember.float64, low=0, high=1),)),
                     RuntimeError, "Found dtype Double but expected Float")
    yield ErrorInput(SampleInput(x * 3, (x,)), RuntimeError,
                     "all elements of input should be between 0 and 1")
    yield ErrorInput(SampleInput(x, (x * 3,)), RuntimeError,
                     "all elements of target should be between 0 and 1")
    yield ErrorInput(SampleInput(x.int(), (x.int(),)), NotImplementedError,
                     "\"binary_cross_entropy\" not implemented for 'Int'")


def _mse_ref(x, t, reduction="mean"):
    d = x.astype(np.float64) - t.astype(np.float64)
    return _reduce(d * d, reduction)


def _huber(x, t, delta):
    z = np.abs(x.astype(np.float64) - t.astype(np.float64))
    return np.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta))


def _huber_ref(x, t, reduction="mean", delta=1.0):
    return _reduce(_huber(x, t, delta), reduction)


def _smooth_l1_ref(x, t, reduction="mean", beta=1.0):
    return _reduce(_huber(x, t, beta) / beta, reduction)


def _pointwise_loss_samples(extra=None):
    """Samples for a pointwise loss kernel (same-shaped operands); ``extra``: its keyword
    (delta or beta) and a value, tried besides the default."""
    def samples(dtype, requires_grad):
        def x(*shape, **kw):
            return make(shape, dtype, requires_grad, low=-3, high=3, **kw)
        for reduction in _REDUCTIONS:
            yield SampleInput(x(3, 4), (x(3, 4),), {"reduction": reduction})
            yield SampleInput(x(3, 4, noncontiguous=True), (x(3, 4, noncontiguous=True),),
                              {"reduction": reduction}, name="noncontiguous")
            yield SampleInput(x(), (x(),), {"reduction": reduction}, name="0-dim")
            yield SampleInput(x(0, 2), (x(0, 2),), {"reduction": reduction}, name="empty")
            if extra is not None:
                yield SampleInput(x(3, 4), (x(3, 4),), {"reduction": reduction, extra[0]:
                                                        extra[1]}, name=extra[0])
        yield SampleInput(x(2, 3), (make((2, 3), dtype, low=-3, high=3),),
                          name="target_no_grad")
    return samples


def _torch_loss(name):
    def call(*args, **kwargs):
        import torch
        return getattr(torch.nn.functional, name)(*args, **kwargs)
    return call


def _log_probs(shape, dtype, requires_grad):
    x = make(shape, dtype, low=-2, high=2).log_softmax(-1).detach()
    return x.requires_grad_(requires_grad and dtype.is_floating_point)


def _ctc_samples(dtype, requires_grad):
    lp = _log_probs((4, 2, 3), dtype, requires_grad)
    for reduction in (0, 1, 2):
        yield SampleInput(lp, (_index([[1, 2], [1, 1]]), _index([4, 3]), _index([2, 1]), 0,
                               reduction))
    yield SampleInput(lp, (_index([2, 1, 1]), [4, 4], [1, 2], 0, 1), name="concatenated")
    # (targets must not hold the blank: the reference gives those paths no probability)
    yield SampleInput(lp, (_index([[0, 2], [2, 0]]), [4, 3], [1, 2], 1, 0), name="blank1")
    yield SampleInput(lp, (_index([[1, 1], [2, 0]]), [2, 4], [2, 0], 0, 0, True),
                      name="zero_infinity")
    if not requires_grad:       # an infinite loss: gradcheck cannot difference it
        yield SampleInput(lp, (_index([[1, 1], [2, 0]]), [2, 4], [2, 0], 0, 2, False),
                          name="infinite")
    yield SampleInput(_log_probs((3, 4), dtype, requires_grad), (_index([3, 1]), _index(3),
                                                                  _index(2), 0, 0),
                      name="unbatched")


def _ctc_op(lp, *args):
    """ctc_loss of log_softmax(lp): gradcheck perturbs the normalized log-probabilities the
    gradient assumes."""
    return ember.ctc_loss(lp.log_softmax(-1), *args)


def _ctc_torch(lp, *args):
    import torch
    return torch.ctc_loss(lp.log_softmax(-1), *args)


def _ctc_ref_normalized(lp, *args):
    return _ctc_ref(lp - np.log(np.exp(lp).sum(-1, keepdims=True)), *args)


def _ctc_errors():
    lp = _log_probs((4, 2, 3), ember.float32, False)
    t = _index([[1, 2], [1, 1]])
    yield ErrorInput(SampleInput(lp, (t, [5, 4], [2, 2])), RuntimeError,
                     r"Expected input_lengths to have value at most 4, but got value 5")
    yield ErrorInput(SampleInput(lp, (t, [4, 4], [3, 2])), RuntimeError,
                     r"Expected tensor to have size at least 3 at dimension 1, but got size 2 "
                     r"for argument #2 'targets'")
    yield ErrorInput(SampleInput(lp, (t, [4, 4], [2, 2, 2])), RuntimeError,
                     "target_lengths must be of size batch_size")
    yield ErrorInput(SampleInput(lp, (t, [4], [2, 2])), RuntimeError,
                     "input_lengths must be of size batch_size")
    yield ErrorInput(SampleInput(lp, (t, [4, 4], [2, 2], 3)), RuntimeError,
                     "blank must be in label range")
    yield ErrorInput(SampleInput(lp, (t, [4, 4], [-1, 2])), RuntimeError,
                     r"Expected target_lengths to have value at least 0, but got value -1")
    yield ErrorInput(SampleInput(lp.half(), (t, [4, 4], [2, 2])), NotImplementedError,
                     "\"ctc_loss_cpu\" not implemented for 'Half'")
    yield ErrorInput(SampleInput(lp, (_index([1, 2, 1]), [4, 4], [2, 2])), RuntimeError,
                     r"Expected tensor to have size 4 at dimension 0, but got size 3")


def _ctc_backward_samples(dtype, requires_grad):
    lp = _log_probs((4, 2, 3), dtype, False)
    t = _index([[1, 2], [2, 2]])
    for reduction in ("none", "mean", "sum"):
        grad = make((2,) if reduction == "none" else (), dtype)
        yield SampleInput(grad, (lp, t, [4, 3], [2, 2], 0, reduction, False))
    yield SampleInput(make((), dtype), (lp, t, [4, 1], [2, 2], 0, "sum", True),
                      name="zero_infinity")


def _ctc_backward_ref(grad, lp, targets, input_lengths, target_lengths, blank, reduction,
                      zero_infinity):
    if not zero_infinity:
        return _ctc_grad_ref(grad, lp, targets, input_lengths, target_lengths, blank, reduction)
    lp_b, targets_b, in_len, tg_len = _ctc_batch(lp, targets, input_lengths, target_lengths)
    out = np.zeros(lp.shape)
    for n in range(lp_b.shape[1]):
        if _ctc_paths(lp_b[:in_len[n], n], targets_b[n][:tg_len[n]], blank)[0] > 0:
            # a finite loss: its sample's gradient as if alone (the mean still divides by N)
            g = grad if reduction != "none" else grad[n:n + 1]
            sub = _ctc_grad_ref(g, lp[:, n:n + 1], targets[n:n + 1], [in_len[n]], [tg_len[n]],
                                blank, reduction)
            out[:, n] = sub[:, 0] / (lp.shape[1] if reduction == "mean" else 1)
    return out


OPS = [
    OpInfo("nn.functional.cross_entropy", _ce_ref, _ce_samples(), dtypes=FLOATS + LOW,
           op=lambda *a, **k: ember.nn.functional.cross_entropy(*a, **k),
           gradgrad=True, error_inputs=_ce_errors("cross_entropy"),
           tol={ember.float16: (2e-3, 2e-3), ember.bfloat16: (1.6e-2, 2e-2)}),
    OpInfo("nn.functional.nll_loss", _nll_loss_ref, _ce_samples(probabilities=False),
           op=lambda *a, **k: ember.nn.functional.nll_loss(*a, **k),
           dtypes=FLOATS + LOW, gradgrad=True, error_inputs=_ce_errors("nll_loss"),
           # torch sums 16-bit losses in their own dtype, ember in float32 (one rounding)
           parity_tol={ember.float16: (2e-3, 2e-3), ember.bfloat16: (1.6e-2, 2e-2)}),
    OpInfo("nn.functional.binary_cross_entropy", _bce_ref, _bce_samples, dtypes=FLOATS + LOW,
           op=lambda *a, **k: ember.nn.functional.binary_cross_entropy(*a, **k),
           gradgrad=True, error_inputs=_bce_errors,
           tol={ember.float16: (2e-3, 2e-3), ember.bfloat16: (1.6e-2, 2e-2)}),
    OpInfo("_mse_loss", _mse_ref, _pointwise_loss_samples(), dtypes=FLOATS + LOW,
           gradgrad=True, torch_op=_torch_loss("mse_loss"),
           tol={ember.float16: (2e-3, 2e-3), ember.bfloat16: (1.6e-2, 2e-2)}),
    OpInfo("_huber_loss", _huber_ref, _pointwise_loss_samples(("delta", 0.7)),
           dtypes=FLOATS + LOW, gradgrad=True, torch_op=_torch_loss("huber_loss"),
           tol={ember.float16: (2e-3, 2e-3), ember.bfloat16: (1.6e-2, 2e-2)}),
    OpInfo("_smooth_l1_loss", _smooth_l1_ref, _pointwise_loss_samples(("beta", 0.5)),
           dtypes=FLOATS + LOW, gradgrad=True, torch_op=_torch_loss("smooth_l1_loss"),
           tol={ember.float16: (2e-3, 2e-3), ember.bfloat16: (1.6e-2, 2e-2)}),
    OpInfo("ctc_loss", _ctc_ref_normalized, _ctc_samples, op=_ctc_op, torch_op=_ctc_torch,
           error_inputs=_ctc_errors),
    OpInfo("_ctc_loss_backward", _ctc_backward_ref, _ctc_backward_samples, grad=False,
           tol={ember.float32: (1e-4, 1e-5)}),
]
