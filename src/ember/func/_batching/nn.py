"""Rules for convolution, pooling, normalization, attention and loss ops.

Most of these take an optional leading batch dim N: with it, the vmap batch folds into N;
without it, the vmap batch becomes N. A batched convolution weight (model ensembling,
per-sample gradients) becomes a grouped convolution with one group set per batch element.
"""

from ember._tensor import Tensor
from ember.func._batching import FALLBACK_NAMES, rule
from ember.func._batching.elementwise import align
from ember.func._batching.reductions import expand_unbatched, rows
from ember.ops.attention import logical_layout
from ember.ops._registry import REGISTRY, call


def _spatial(op, args, flags, params, size, k, batched=(0,)):
    """Run an op whose inputs are (N, C, *k spatial dims) or (C, *spatial) on values."""
    if any(f for i, f in enumerate(flags) if i not in batched and f):
        return NotImplemented
    args = list(args)
    for i in batched:                   # max_unpool's input may be shared by batched indices
        if not flags[i] and args[i] is not None:
            args[i] = expand_unbatched(args[i], size)
    x = args[0]
    ndim = x.ndim - 1
    if ndim == k + 1:
        return call(op, args, params)
    if ndim != k + 2:
        return NotImplemented
    lead = tuple(x.shape[:2])
    for i in batched:
        if args[i] is not None:
            args[i] = args[i].reshape((-1,) + tuple(args[i].shape[2:]))
    res = call(op, args, params)
    if isinstance(res, tuple):
        return tuple(r.reshape(lead + tuple(r.shape[1:])) for r in res)
    return res.reshape(lead + tuple(res.shape[1:]))


def _by_name(k, batched=(0,)):
    def batch(op, args, flags, params, size):
        return _spatial(op, args, flags, params, size, k, batched)
    return batch


for _k in (1, 2, 3):
    _names = [f"{p}{_k}d" for p in ("avg_pool", "adaptive_avg_pool", "adaptive_max_pool")]
    _names += [f"nn.functional.{n}" for n in _names]
    _names += [f"nn.functional.max_pool{_k}d_with_indices", f"max_pool{_k}d_with_indices",
               f"nn.functional.adaptive_max_pool{_k}d_with_indices"]
    rule(*[n for n in _names if n in REGISTRY])(_by_name(_k))
    rule(f"nn.functional.max_unpool{_k}d")(_by_name(_k, batched=(0, 1)))
rule("nn.functional.unfold")(_by_name(2))


@rule("channel_shuffle")
def _channel_shuffle(op, args, flags, params, size):
    """channel_shuffle needs (N, C, *) with any number of trailing dims: fold the batch into N."""
    x = args[0]
    if x.ndim <= 3:
        return NotImplemented           # channel_shuffle's own error for fewer than 3 dims
    return call(op, [x.reshape((-1,) + tuple(x.shape[2:]))], params).reshape(x.shape)
rule("nn.functional.fold")(_by_name(1))


@rule("nn.functional.interpolate")
def _interpolate(op, args, flags, params, size):
    return _spatial(op, args, flags, params, size, args[0].ndim - 3)


@rule("nn.functional.pad")
def _pad(op, args, flags, params, size):
    pad, mode = params[0], params[1]
    if mode == "constant":
        return call(op, args, params)
    return _spatial(op, args, flags, params, size, len(pad) // 2)


def _conv(op, args, flags, params, size, groups_at):
    (x, w, b), (fx, fw, fb) = args, flags
    k = w.ndim - fw - 2
    if not fw and not fb:
        return _spatial(op, args, flags, params, size, k)
    if op.name == "convolution" and params[3]:
        return NotImplemented           # transposed with a batched weight
    unbatched_input = x.ndim - fx == k + 1
    if not fx:
        x = expand_unbatched(x, size)
    if unbatched_input:
        x = x.unsqueeze(1)
    n, c = x.shape[1], x.shape[2]
    x = x.movedim(0, 1).reshape((n, size * c) + tuple(x.shape[3:]))
    if not fw:
        w = expand_unbatched(w, size)
    out_channels = w.shape[1]
    w = w.reshape((size * out_channels,) + tuple(w.shape[2:]))
    if b is not None:
        b = (b if fb else expand_unbatched(b, size)).reshape(-1)
    params = list(params)
    params[groups_at] = params[groups_at] * size
    y = call(op, [x, w, b], tuple(params))
    y = y.reshape((n, size, out_channels) + tuple(y.shape[2:])).movedim(1, 0)
    return y.squeeze(1) if unbatched_input else y


@rule("conv1d", "conv2d", "conv3d")
def _conv_nd(op, args, flags, params, size):
    return _conv(op, args, flags, params, size, 3)


@rule("convolution")
def _convolution(op, args, flags, params, size):
    return _conv(op, args, flags, params, size, 5)


@rule("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
def _conv_transpose(op, args, flags, params, size):
    (x, w, b), (fx, fw, fb) = args, flags
    k = w.ndim - fw - 2
    if not (fw or fb):
        return _spatial(op, args, flags, params, size, k)
    if x.ndim - fx not in (k + 1, k + 2) or w.ndim - fw != k + 2:
        return NotImplemented               # the op's own error
    # a batched weight: one group set per batch element, the batch folded into the channels
    unbatched_input = x.ndim - fx == k + 1
    x = x if fx else expand_unbatched(x, size)
    if unbatched_input:
        x = x.unsqueeze(1)
    n, c = x.shape[1], x.shape[2]
    x = x.movedim(0, 1).reshape((n, size * c) + tuple(x.shape[3:]))
    w = w if fw else expand_unbatched(w, size)
    groups = params[3]
    out_channels = w.shape[2] * groups
    w = w.reshape((size * w.shape[1],) + tuple(w.shape[2:]))
    if b is not None:
        b = (b if fb else expand_unbatched(b, size)).reshape(-1)
    params = params[:3] + (groups * size,) + params[4:]
    y = call(op, [x, w, b], params)
    y = y.reshape((n, size, out_channels) + tuple(y.shape[2:])).movedim(1, 0)
    return y.squeeze(1) if unbatched_input else y


@rule("_convolution_weight")
def _convolution_weight(op, args, flags, params, size):
    x, g = [a if f else expand_unbatched(a, size) for a, f in zip(args, flags)]
    kernel_size, stride, padding, dilation, groups = params
    if x.ndim != len(kernel_size) + 3:
        return NotImplemented
    n = x.shape[1]
    xs = x.movedim(0, 1).reshape((n, -1) + tuple(x.shape[3:]))
    gs = g.movedim(0, 1).reshape((n, -1) + tuple(g.shape[3:]))
    w = call(op, [xs, gs], (kernel_size, stride, padding, dilation, groups * size))
    return w.reshape((size, -1) + tuple(w.shape[1:]))


_SHARED_STATS = (
    "Batch norm got a batched tensor as input while the running_mean or running_var, which "
    "will be updated in place, were not batched.\nIf you are using a module and do not need "
    "eval mode, please set `track_running_stats` to be False.If you are using a prebuilt "
    "module and do not need eval mode, please see the functorch website for resources on how "
    "to patch your module to work with vmap")


@rule("native_batch_norm")
def _batch_norm(op, args, flags, params, size):
    x, w, b, rm, rv = args
    training = params[0]
    shared = [v is not None and not f for v, f in ((rm, flags[3]), (rv, flags[4]))]
    if training and flags[0] and any(shared):
        raise RuntimeError(_SHARED_STATS)
    if not flags[0]:
        return _affine_batched(op, args, flags, params, size)
    if not training and not any(flags[1:]):
        out, mean, invstd = call(op, [x.reshape((-1,) + tuple(x.shape[2:]))] + list(args[1:]),
                                 params)
        return out.reshape(x.shape), _expand(mean, size), _expand(invstd, size)
    # fold the batch into the channels: one set of statistics per (element, channel)
    n, c = x.shape[1], x.shape[2]
    xs = x.movedim(0, 1).reshape((n, size * c) + tuple(x.shape[3:]))
    folded = [None if v is None else (v if f else expand_unbatched(v, size)).reshape(-1)
              for v, f in zip(args[1:], flags[1:])]
    out, mean, invstd = call(op, [xs] + folded, params)
    out = out.reshape(tuple(x.shape[1:2]) + (size,) + tuple(x.shape[2:])).movedim(1, 0)
    return out, rows(mean, size), rows(invstd, size)


def _expand(t, size):
    return expand_unbatched(t, size).contiguous()


def _affine_batched(op, args, flags, params, size):
    """An unbatched input with only the weight and bias batched: normalize once (updating the
    running statistics once), then apply each element's affine map."""
    x, w, b, rm, rv = args
    if flags[3] or flags[4]:
        return NotImplemented
    out, mean, invstd = call(op, [x, None, None, rm, rv], params)
    shape = (1, -1) + (1,) * (x.ndim - 2)

    def channels(v, f):
        return v.reshape((size,) + shape) if f else v.reshape(shape)
    if w is not None:
        out = out * channels(w, flags[1])
    if b is not None:
        out = out + channels(b, flags[2])
    return out, _expand(mean, size), _expand(invstd, size)


def _norm_then_affine(norm, args, flags, size, shape):
    """A norm whose weight or bias is batched (per-sample gradients batch the parameters):
    normalize without them, then apply each element's weight and bias; ``shape(v)`` is the
    shape that lines a (batch, *param) value up with the (batch, *input) output."""
    x, w, b = args
    out, mean, invstd = norm(x if flags[0] else expand_unbatched(x, size))
    if w is not None:
        w = w if flags[1] else expand_unbatched(w, size)
        out = out * w.reshape(shape(w))
    if b is not None:
        b = b if flags[2] else expand_unbatched(b, size)
        out = out + b.reshape(shape(b))
    return out, mean, invstd


@rule("native_layer_norm")
def _layer_norm(op, args, flags, params, size):
    if not (flags[1] or flags[2]):
        if not flags[0]:
            return NotImplemented
        return call(op, args, params)
    x = args[0]
    ndim = x.ndim - flags[0] + 1                 # with the batch dim

    def shape(v):
        return (size,) + (1,) * (ndim - v.ndim) + tuple(v.shape[1:])
    return _norm_then_affine(lambda x: call(op, [x, None, None], params), args, flags, size,
                             shape)


@rule("native_group_norm")
def _group_norm(op, args, flags, params, size):
    n, c, hxw, group, eps = params

    def norm(x):
        xs = x.reshape((size * n,) + tuple(x.shape[2:]))
        out, mean, invstd = call(op, [xs, None, None], (size * n, c, hxw, group, eps))
        return (out.reshape(x.shape), mean.reshape(size, n, group),
                invstd.reshape(size, n, group))
    if not flags[0] and not (flags[1] or flags[2]):
        return NotImplemented
    if flags[1] or flags[2]:
        ndim = args[0].ndim - flags[0] + 1

        def shape(v):
            return (size, 1, c) + (1,) * (ndim - 3)
        return _norm_then_affine(norm, args, flags, size, shape)
    x = args[0]
    xs = x.reshape((size * n,) + tuple(x.shape[2:]))
    out, mean, invstd = call(op, [xs] + list(args[1:]), (size * n, c, hxw, group, eps))
    return (out.reshape(x.shape), mean.reshape(size, n, group),
            invstd.reshape(size, n, group))


@rule("nn.functional.scaled_dot_product_attention")
def _attention(op, args, flags, params, size):
    from ember.func._batching import handled_level
    level = handled_level()             # (first thing: the batched ops below run rules too)
    q, k, v, mask = [a if f or a is None else expand_unbatched(a, size)
                     for a, f in zip(args[:3], flags[:3])] + [args[3]]
    rank = max(q.ndim, k.ndim, v.ndim)      # their leading dims broadcast: 1s after the batch
    q, k, v = (t.reshape((size,) + (1,) * (rank - t.ndim) + tuple(t.shape[1:]))
               for t in (q, k, v))
    if flags[3]:
        q, mask = align([q, mask], [True, True], size)
    if q.device.type != "cpu":
        return call(op, [q, k, v, mask], params)
    with logical_layout(args[:4], flags[:4], params[0], params[3]):
        if not _flash_kernel(q, k, v, args[3], params):
            return call(op, [q, k, v, mask], params)
        return _flash_loop(op, [q, k, v, mask], params, size, level)


def _flash_kernel(q, k, v, mask, params):
    """Whether PyTorch's choice, made on the logical tensors, is its CPU flash kernel, which
    has no batching rule (the math kernel's ops have)."""
    from ember.autograd._forward_traces import requires_grad_here
    from ember.ops.attention import _cpu_flash
    if 0 in q.shape[1:-1] or 0 in v.shape[1:]:
        return False                    # nothing to attend: neither kernel runs
    return _cpu_flash(q, k, v, params[0], params[3], mask,
                      mask is not None and requires_grad_here(mask))


def _flash_loop(op, values, params, size, level):
    """The CPU flash kernel under vmap: PyTorch's fallback loop, which warns (at this level,
    and at the outer ones once per example of the inner), refuses a batch of 0 and, when a
    transform differentiates inside the vmap, loops (and warns in) the backward kernel too."""
    from ember.func._batching import _REPEATS, differentiated_within, repeating, warn_fallback
    from ember.ops.attention import _FLASH_BACKWARD, _FLASH_FORWARD
    warn_fallback("aten::" + _FLASH_FORWARD)
    if size == 0:
        raise RuntimeError(f"Batching rule not implemented for aten::{_FLASH_FORWARD}. The "
                           f"fallback path does not support vmap over dims of size 0.")
    repeats = _REPEATS.n                # (this call stands for as many of PyTorch's)
    with repeating(size):       # (outer levels: PyTorch's loop calls once per example)
        out = call(op, values, params)
    first = out[0] if isinstance(out, tuple) else out
    if first.requires_grad and differentiated_within(level):
        # (the vmaps inside, jacrev's, warn from the op's derivative: they loop first)
        first.register_hook(lambda g: _warn_backward_loop("aten::" + _FLASH_BACKWARD, g, level,
                                                          repeats))
    return out


def _reduced(loss, size, reduction, denominator=None):
    flat = rows(loss, size)
    if reduction == "sum":
        return flat.sum(1)
    if denominator is None:
        return flat.mean(1)
    # an example with every position ignored is NaN (0/0), as PyTorch's, but its gradient is
    # zero: dividing by its zero would make that 0 * inf
    import ember
    empty = denominator == 0
    total = flat.sum(1)
    nan = ember.zeros_like(total).masked_fill(empty, float("nan"))
    return total / denominator.masked_fill(empty, 1) + nan


@rule("nn.functional.cross_entropy", "nn.functional.nll_loss")
def _class_loss(op, args, flags, params, size):
    (x, t, w), (fx, ft, fw) = args, flags
    p = dict(zip(op.param_names, params))
    if p["size_average"] is not None or p["reduce"] is not None:
        return NotImplemented
    if fw and (t.is_floating_point() or p.get("label_smoothing", 0.0)):
        return NotImplemented           # class probabilities or smoothing mix the weights
    batched_weight = w if fw else None
    w = None if fw else w
    if not fx:
        x = expand_unbatched(x, size)
    if not ft:
        t = expand_unbatched(t, size)
    if x.ndim > 2:                      # (B, N, C, *d): fold B into N
        xs, ts = x.reshape((-1,) + tuple(x.shape[2:])), t.reshape((-1,) + tuple(t.shape[2:]))
    else:                               # (B, C): B becomes N
        xs, ts = x, t
    reduction = p["reduction"]
    params = tuple("none" if n == "reduction" else v for n, v in p.items())
    loss = call(op, [xs, ts, w], params)
    shape = (size,) + tuple(x.shape[1:2] if x.ndim > 2 else ()) + tuple(x.shape[3:])
    if batched_weight is not None:
        return _per_example_weights(loss, t, batched_weight, p["ignore_index"], size,
                                    reduction, shape)
    if reduction == "none":
        return loss.reshape(shape)
    den = None
    if reduction == "mean" and not t.is_floating_point():
        import ember
        tt = rows(t, size)
        keep = tt != p["ignore_index"]
        den = keep.sum(1).to(loss.dtype) if w is None else \
            (w[ember.where(keep, tt, 0)] * keep).sum(1)
    return _reduced(loss, size, reduction, den)


def _per_example_weights(loss, target, weight, ignore_index, size, reduction, shape):
    """An unweighted class loss scaled by each example's class weights, then reduced."""
    import ember
    targets = rows(target, size)
    keep = targets != ignore_index
    scale = ember.gather(weight, 1, ember.where(keep, targets, 0)) * keep
    weighted = rows(loss, size) * scale
    if reduction == "none":
        return weighted.reshape(shape)
    return _reduced(weighted, size, reduction, scale.sum(1))


@rule("nn.functional.binary_cross_entropy", "_mse_loss", "_huber_loss", "_smooth_l1_loss",
      "_soft_margin_loss", "_binary_cross_entropy_with_logits")
def _pointwise_loss(op, args, flags, params, size):
    """Losses summing elementwise terms: computed unreduced for the whole batch, then reduced
    per batch element (not with the legacy size_average/reduce arguments)."""
    p = dict(zip(op.param_names, params))
    if p.get("size_average") is not None or p.get("reduce") is not None:
        return NotImplemented
    tensors = [a if f else expand_unbatched(a, size) for a, f in zip(args[:2], flags[:2])]
    aligned = align(tensors + list(args[2:]), [True, True] + list(flags[2:]), size)
    loss = call(op, aligned, tuple("none" if n == "reduction" else v for n, v in p.items()))
    reduction = p["reduction"]
    return loss if reduction == "none" else _reduced(loss, size, reduction)


@rule("_fused_rms_norm")
def _rms_norm(op, args, flags, params, size):
    """rms_norm treats leading dims as batch dims; a batched weight scales the result after."""
    (x, w), (fx, fw) = args, flags
    x = x if fx else expand_unbatched(x, size)
    if not fw:
        return call(op, [x, w], params)
    if w.dtype != x.dtype or x.dtype.itemsize < 4:
        return NotImplemented           # the weight multiplies before rounding to x's dtype
    out, rstd = call(op, [x, None], params)
    lead = x.ndim - w.ndim
    return out * w.reshape((size,) + (1,) * lead + tuple(w.shape[1:])), rstd


@rule("_multi_margin_loss", "_multilabel_margin_loss")
def _margin_loss(op, args, flags, params, size):
    """Per-sample margin losses over (N, C) or (C,): the batch folds into N, then each example
    reduces its own samples (a batched class weight takes the loop)."""
    if len(flags) > 2 and flags[2]:
        return NotImplemented
    x, t = args[0], args[1]
    if x.ndim - flags[0] not in (1, 2) or t.ndim - flags[1] != x.ndim - flags[0] - \
            (op.name == "_multi_margin_loss"):
        return NotImplemented           # the op's own error
    x, t = (a if f else expand_unbatched(a, size) for a, f in zip((x, t), flags))
    samples = tuple(x.shape[:-1])
    folded = [x.reshape(-1, x.shape[-1]), t.reshape((-1,) + tuple(t.shape[len(samples):]))]
    reduction = params[-1]
    loss = call(op, folded + list(args[2:]), tuple(params[:-1]) + ("none",))
    loss = loss.reshape(samples)
    return loss if reduction == "none" or loss.ndim == 1 else _reduced(loss, size, reduction)


@rule("ctc_loss")
def _ctc_loss(op, args, flags, params, size):
    """The batch folds into N (each example's lengths repeated per element; concatenated
    targets stay in order); the unreduced losses are then reduced per example."""
    import ember
    from ember.func._batching import (_REPEATS, differentiated_within, handled_level,
                                      repeating, warn_fallback)
    from ember.ops._loss_common import reduction_name
    from ember.ops.ctc import check_lengths
    level = handled_level()             # (first thing: the batched ops below run rules too)
    lp, targets = (a if f else expand_unbatched(a, size) for a, f in zip(args, flags))
    input_lengths, target_lengths, blank, reduction, zero_infinity = params
    check_lengths(input_lengths, target_lengths)
    if lp.ndim not in (3, 4) or not lp.is_floating_point():
        return NotImplemented           # the op's own error
    n = 1 if lp.ndim == 3 else lp.shape[2]
    lengths = [_lengths_list(v, n) for v in (input_lengths, target_lengths)]
    if None in lengths or targets.ndim not in ((2,) if lp.ndim == 3 else (2, 3)):
        return NotImplemented
    folded = lp.movedim(0, 1).reshape(lp.shape[1], size * n, lp.shape[-1])
    if lp.ndim == 4:                    # padded (N, S) targets, or concatenated ones
        targets = targets.reshape((size * n,) + tuple(targets.shape[2:])) \
            if targets.ndim == 3 else targets.reshape(-1)
    warn_fallback(_ctc_loss_aten(None, params, level))     # PyTorch has no rule: it loops
    by_tensor = isinstance(input_lengths, ember.Tensor)
    in_len, tg_len = ((ember.tensor(v * size) if by_tensor else v * size) for v in lengths)
    repeats = _REPEATS.n                # (this call stands for as many of PyTorch's)
    with repeating(size):       # (outer levels: PyTorch's loop calls once per example)
        nll = call(op, [folded, targets], (in_len, tg_len, blank, 0, zero_infinity))
    if nll.requires_grad and differentiated_within(level):  # and its backward's loop warns
        backward = "aten::_ctc_loss_backward" + (".Tensor" if by_tensor else "")
        nll.register_hook(lambda g: _warn_backward_loop(backward, g, level, repeats))
    nll = nll.reshape(size, n)
    reduction = reduction_name(reduction)
    if reduction == "sum":
        return nll.sum(1)
    if reduction == "mean":
        scale = ember.tensor([max(t, 1) for t in lengths[1]], dtype=nll.dtype,
                             device=nll.device)
        return (nll / scale).mean(1)
    return nll.reshape(size) if lp.ndim == 3 else nll


def _ctc_loss_aten(values, params, level):
    """The overload PyTorch's loop names: by the lengths' type, the composite's ``_ctc_loss``
    when a transform differentiates inside the vmap ``level``."""
    from ember.func._batching import differentiated_within
    by_tensor = isinstance(params[0], Tensor)
    if level is not None and differentiated_within(level):
        return "aten::_ctc_loss" + (".Tensor" if by_tensor else "")
    return "aten::ctc_loss" + (".Tensor" if by_tensor else ".IntList")


FALLBACK_NAMES["ctc_loss"] = _ctc_loss_aten         # (per-example lengths take the loop)


def _warn_backward_loop(aten, grad, level, repeats):
    """PyTorch's warnings for a backward its vmap ``level`` loops (a hook on the forward's
    result): once per call, for each of the ``repeats`` calls the forward stood for and each
    example of the vmaps inside ``level`` that batch ``grad`` (jacrev's)."""
    from ember.func._batched import BatchedTensor, level_size
    from ember.func._batching import repeating, warn_fallback
    while type(grad) is BatchedTensor:
        if grad._level > level:
            repeats *= level_size(grad._level)
        grad = grad._value
    with repeating(repeats):
        warn_fallback(aten)


FALLBACK_NAMES["_ctc_loss_backward"] = lambda values, params, level: \
    "aten::_ctc_loss_backward" + (".Tensor" if isinstance(params[0], Tensor) else "")


def _lengths_list(value, n):
    """ctc_loss's lengths (a sequence or an unbatched tensor) as n ints, else None."""
    import ember
    if type(value) is ember.Tensor:
        if value.dtype.is_floating_point or value.dtype.is_complex:
            return None
        value = value.tolist()
    elif isinstance(value, ember.Tensor):
        return None                     # batched: per-example lengths take the loop
    if not isinstance(value, (list, tuple)) or len(value) != n:   # (a number: the op refuses)
        return None
    return [int(v) for v in value]


@rule("_fractional_max_pool2d", "_fractional_max_pool3d")
def _fractional_max_pool(op, args, flags, params, size):
    """(N, C, *spatial) input and (N, C, nd) samples: the batch folds into N for both."""
    k = len(params[0])
    x, samples = (a if f else expand_unbatched(a, size) for a, f in zip(args, flags))
    if x.ndim == k + 2 and samples.ndim == 4 and samples.shape[1] == 1:
        # unbatched examples (C, *spatial), pooled as batches of one
        res = _fractional_max_pool(op, [x.unsqueeze(1), samples], [True, True], params, size)
        return res if res is NotImplemented else tuple(r.squeeze(1) for r in res)
    if x.ndim != k + 3 or samples.ndim != 4 or samples.shape[1] != x.shape[1] or \
            samples.dtype != x.dtype:
        return NotImplemented           # the op's own error
    return _spatial(op, [x, samples], [True, True], params, size, k, batched=(0, 1))


@rule("_grid_sampler")
def _grid_sampler(op, args, flags, params, size):
    """grid_sample: the batch folded into N (each example's input sampled at its own grid)."""
    x, g = [a if f else expand_unbatched(a, size) for a, f in zip(args, flags)]
    n = x.shape[1]
    y = call(op, [x.reshape((size * n,) + tuple(x.shape[2:])),
                  g.reshape((size * n,) + tuple(g.shape[2:]))], params)
    return y.reshape((size, n) + tuple(y.shape[1:]))


@rule("_grid_sampler_backward")
def _grid_sampler_backward(op, args, flags, params, size):
    """grid_sample's backward (a batched cotangent under jacrev): the batch folded into N of
    the cotangent, input and grid, as PyTorch's rule for grid_sampler_2d_backward does."""
    values = [a if f else expand_unbatched(a, size) for a, f in zip(args, flags)]
    n = values[1].shape[1]
    res = call(op, [v.reshape((size * n,) + tuple(v.shape[2:])) for v in values], params)
    return tuple(r.reshape((size, n) + tuple(r.shape[1:])) for r in res)
