"""Multi-tensor (``foreach=True``) steps of the Adam family where some state was kept from
before its parameter changed shape (``p.data = ...`` without a fresh optimizer, or another
model's state_dict loaded).

PyTorch's multi-tensor step runs each list op over every parameter before the next op, each
tensor's op checking shapes as it comes: its error comes at the first op some parameter's
stale state fails, with that op written for the parameters before it and every earlier op
for all. These steps do the same on backend arrays (``updates`` as each optimizer's
``_update`` takes them; the step counts are already taken, as PyTorch's list op takes them
first). Only this rare path runs op by op; a step without stale state runs as before.
"""

from ember.backend import xp_of
from ember.optim._state import check_shapes, scale_

__all__ = ["is_stale", "adam", "adamax", "nadam", "radam", "adagrad", "adadelta", "rmsprop"]


def is_stale(updates, slots=(2, 3)):
    """Whether some update's state array (at one of ``slots`` in it, None for none) differs
    in shape from its parameter (the update's first)."""
    for u in updates:
        shape = u[0].shape
        for i in slots:
            a = u[i]
            if a is not None and a.shape != shape:
                return True
    return False


def _column(updates, i):
    return [u[i] for u in updates]


def _decayed(xs, gs, weight_decay, lr=None, decoupled=False):
    """The gradients with weight decay: ``x *= 1 - lr * wd`` when decoupled (the gradients
    as they were), else new ``g + wd * x`` (same shapes: the gradient is the parameter's)."""
    if not weight_decay:
        return gs
    if decoupled:
        for x in xs:
            scale_(x, 1 - lr * weight_decay)
        return gs
    return [g + weight_decay * x for x, g in zip(xs, gs)]


def _wide(a):
    """``a`` in float32 where it is 16-bit (PyTorch's kernels compute so and round once)."""
    return a.astype("float32") if a.dtype.itemsize < 4 and a.dtype.kind in "fV" else a


def _into(a, value):
    """``a[...] = value`` (rounded once to ``a``'s dtype)."""
    a[...] = value


def _lerp_(outs, others, weight):
    for a, b in zip(outs, others):
        check_shapes(a.shape, b.shape)
        wide = _wide(a)
        _into(a, wide + weight * (_wide(b) - wide))


def _mul_(outs, factor):
    for a in outs:
        scale_(a, factor)


def _addcmul_(outs, bs, cs, value):
    """``a += value * b * c`` for each, ``value`` one number or one per tensor."""
    for i, (a, b, c) in enumerate(zip(outs, bs, cs)):
        check_shapes(a.shape, b.shape, c.shape)
        _into(a, _wide(a) + _at(value, i) * (_wide(b) * _wide(c)))


def _addcdiv_(outs, bs, cs, value):
    """``a += value * b / c`` for each, ``value`` one number or one per tensor."""
    for i, (a, b, c) in enumerate(zip(outs, bs, cs)):
        check_shapes(a.shape, b.shape, c.shape)
        _into(a, _wide(a) + _at(value, i) * (_wide(b) / _wide(c)))


def _maximum_(outs, others):
    for a, b in zip(outs, others):
        check_shapes(a.shape, b.shape)
        xp_of(a).maximum(a, b, out=a)


def _at(value, i):
    return value[i] if isinstance(value, list) else value


def _roots(vs, eps=None):
    """New ``sqrt(v)`` (``+ eps``) for each."""
    out = [xp_of(v).sqrt(v) for v in vs]
    if eps is not None:
        for r in out:
            r += eps
    return out


def _moments(xs, gs, ms, vs, lr, beta1, beta2, weight_decay, decoupled):
    """Weight decay, ``lerp_`` of the averages, ``mul_`` and ``addcmul_`` of the squares'
    (Adam, NAdam, RAdam): the gradients with decay."""
    gs = _decayed(xs, gs, weight_decay, lr, decoupled)
    _lerp_(ms, gs, 1 - beta1)
    _mul_(vs, beta2)
    _addcmul_(vs, gs, gs, 1 - beta2)
    return gs


def _bump(params):
    for p in params:
        p._bump_version()


def adam(params, updates, *, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad):
    xs, gs, ms, vs = (_column(updates, i) for i in range(4))
    ts = _column(updates, 5)
    _moments(xs, gs, ms, vs, lr, beta1, beta2, weight_decay, decoupled)
    if amsgrad:
        vmaxs = _column(updates, 4)
        _maximum_(vmaxs, vs)
        vs = vmaxs
    roots = _roots(vs)
    for r, t in zip(roots, ts):
        r /= (1 - beta2 ** t) ** 0.5
        r += eps
    _addcdiv_(xs, ms, roots, [-(lr / (1 - beta1 ** t)) for t in ts])
    _bump(params)


def adamax(params, updates, *, lr, beta1, beta2, eps, weight_decay):
    xs, gs, ms, us, coefs = (_column(updates, i) for i in range(5))
    gs = _decayed(xs, gs, weight_decay)
    _lerp_(ms, gs, 1 - beta1)
    _mul_(us, beta2)
    gs = [abs(g) + eps for g in gs]
    _maximum_(us, gs)
    _addcdiv_(xs, ms, us, [-c for c in coefs])
    _bump(params)


def nadam(params, updates, products, *, lr, beta1, beta2, eps, weight_decay, decoupled):
    """``products``: (mu_product array, its value before this step, after) of each: PyTorch
    multiplies them after the moments' list ops, so they stay as they were if those fail."""
    new = [(a, a.copy()) for a, _ in products]
    for a, old in products:
        a[...] = old
    xs, gs, ms, vs, bias2, grad_coefs, avg_coefs = (_column(updates, i) for i in range(7))
    gs = _moments(xs, gs, ms, vs, lr, beta1, beta2, weight_decay, decoupled)
    roots = _roots(vs)
    for a, value in new:
        a[...] = value
    for r, b in zip(roots, bias2):
        r /= b ** 0.5
        r += eps
    _addcdiv_(xs, gs, roots, [-c for c in grad_coefs])
    _addcdiv_(xs, ms, roots, [-c for c in avg_coefs])
    _bump(params)


def radam(params, updates, *, lr, beta1, beta2, eps, weight_decay, decoupled):
    """The update ``x += m * buffer``: ``buffer`` is ``-coef / (sqrt(v) + eps)`` when
    rectified, else ``-coef`` everywhere, in ``v``'s shape either way."""
    xs, gs, ms, vs, coefs, rectified = (_column(updates, i) for i in range(6))
    _moments(xs, gs, ms, vs, lr, beta1, beta2, weight_decay, decoupled)
    buffers = _roots(vs, eps)
    for b, coef, rect in zip(buffers, coefs, rectified):
        if rect:
            xp_of(b).divide(-coef, b, out=b)
        else:
            b[...] = -coef
    _addcmul_(xs, ms, buffers, 1)
    _bump(params)


def adagrad(params, updates, *, eps, weight_decay, maximize=False):
    xs, gs, sums, rates = (_column(updates, i) for i in range(4))
    gs = _decayed(xs, gs, weight_decay)
    _addcmul_(sums, gs, gs, 1)
    stds = _roots(sums, eps)
    _addcdiv_(xs, gs, stds, [-r for r in rates])
    _bump(params)


def adadelta(params, updates, *, lr, rho, eps, weight_decay):
    xs, gs, vs, us = (_column(updates, i) for i in range(4))
    gs = _decayed(xs, gs, weight_decay)
    _mul_(vs, rho)
    _addcmul_(vs, gs, gs, 1 - rho)
    stds = [xp_of(v).sqrt(v + eps) for v in vs]
    deltas = [xp_of(u).sqrt(u + eps) for u in us]
    for d, s in zip(deltas, stds):          # _foreach_div_(deltas, std)
        check_shapes(d.shape, s.shape)
        d /= s
    for d, g in zip(deltas, gs):            # _foreach_mul_(deltas, grads)
        check_shapes(d.shape, g.shape)
        d *= g
    _mul_(us, rho)
    _addcmul_(us, deltas, deltas, 1 - rho)
    for x, d in zip(xs, deltas):            # _foreach_add_(params, deltas, alpha=-lr)
        check_shapes(x.shape, d.shape)
        x -= lr * d
    _bump(params)


def rmsprop(params, updates, *, lr, alpha, eps, weight_decay, momentum, centered):
    xs, gs, vs, gbars, bufs = (_column(updates, i) for i in range(5))
    gs = _decayed(xs, gs, weight_decay)
    _mul_(vs, alpha)
    _addcmul_(vs, gs, gs, 1 - alpha)
    if centered:
        _lerp_(gbars, gs, 1 - alpha)
        avgs = []
        for v, gbar in zip(vs, gbars):      # _foreach_addcmul(v, gbar, gbar, value=-1)
            check_shapes(None, v.shape, gbar.shape, gbar.shape)
            avgs.append((_wide(v) - _wide(gbar) * _wide(gbar)).astype(v.dtype))
        avgs = _roots(avgs, eps)
    else:
        avgs = _roots(vs, eps)
    if momentum > 0:
        _mul_(bufs, momentum)
        _addcdiv_(bufs, gs, avgs, 1)
        for x, b in zip(xs, bufs):          # _foreach_add_(params, bufs, alpha=-lr)
            check_shapes(x.shape, b.shape)
            x -= lr * b
    else:
        _addcdiv_(xs, gs, avgs, -lr)
    _bump(params)
