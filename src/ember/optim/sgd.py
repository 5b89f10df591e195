"""SGD with momentum, dampening, Nesterov momentum and weight decay (``torch.optim.SGD``)."""

import functools

import numpy as np

from ember import _dtype as D
from ember._tensor import Tensor, _make
from ember.backend import xp_of
from ember.backend.cpu_kernels import TORCH_16_BIT_LANES
from ember.autograd.grad_mode import no_grad
from ember.optim._checks import check_fused, check_tensor_lr
from ember.optim._state import (apply_updates, check_shapes, complex_message, descend_, grads_of,
                                lr_of, slot, value)
from ember.optim.optimizer import Optimizer, _use_grad_for_differentiable, closure_loss

__all__ = ["SGD"]

_LOW = D.HALF_NP


class SGD(Optimizer):
    """Stochastic gradient descent, following PyTorch's documented update:

    g = grad (+ weight_decay * p); b = momentum * b + (1 - dampening) * g (b = g at the first
    step); g = g + momentum * b (nesterov) or b; p = p - lr * g (+ when maximize).
    """

    _LEGACY_DEFAULTS = {"nesterov": False, "maximize": False, "foreach": None,
                        "differentiable": False, "fused": False}

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        check_tensor_lr(lr)
        if value(lr) < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))
        check_fused(fused, foreach, differentiable)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        """Perform one optimization step."""
        loss = closure_loss(closure)
        for group in self.param_groups:
            hyper = dict(lr=lr_of(group), momentum=group["momentum"],
                         dampening=group["dampening"], weight_decay=group["weight_decay"],
                         nesterov=group["nesterov"])
            params, updates, nested, new_buffers = [], [], [], []
            for p, x, g in grads_of(group, group["maximize"], "SGD", takes_sparse=True,
                                  graph=group["differentiable"], nested=nested):
                if x is None or (p._grad.is_sparse and hyper["momentum"]):   # (x: sparse p)
                    _sparse_step(p, g if x is None else p._grad, self.state[p],
                                 group["maximize"], **hyper)
                    continue
                if hyper["weight_decay"] and p._grad.is_sparse:     # grad + decay * param
                    raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, "
                                       "sparse) instead.")
                params.append(p)
                updates.append((x, g) + self._buffer(p, group, new_buffers))
            for p in nested:    # nested tensors (PyTorch steps them with their ops)
                from ember.nested._strided_optim import sgd_step
                sgd_step(p, self.state, group["maximize"], **hyper)
            update = _update_foreach if group["foreach"] else _update
            if update is _update_foreach and not group["differentiable"] and any(
                    u[2] is not None and u[2].shape != u[0].shape for u in updates):
                try:
                    _stale_foreach(params, updates, **hyper)
                except RuntimeError as error:   # PyTorch's SGD works on complex tensors
                    if any(p.is_complex() for p in params):     # whole (its messages name
                        raise complex_message(error) from None  # no real views)
                    raise
            else:
                apply_updates("sgd", params, updates, update, whole=True,
                              differentiable=group["differentiable"], **hyper)
            for p, buf in new_buffers:      # kept only once the step went through, as PyTorch
                self.state[p]["momentum_buffer"] = buf
        return loss

    def _buffer(self, p, group, new_buffers):
        """(momentum buffer or None, whether this is its first step) of ``p``; the buffer
        is made on its first step, its values still to be set, and added to
        ``new_buffers``."""
        if not group["momentum"]:
            return None, False
        state = self.state[p]
        buf = state.get("momentum_buffer")
        if buf is None:
            buf = _make(p._data.copy())     # values set next
            new_buffers.append((p, buf))
            return slot(buf, group), True
        return slot(buf, group), False


def _sparse_step(p, g, state, maximize, *, lr, momentum, dampening, weight_decay, nesterov):
    """One step of ``p`` whose gradient ``g`` is sparse, in PyTorch's tensor ops: a sparse
    momentum buffer holds the rows the gradients touched; a sparse parameter takes the
    weight decay (sparse + sparse) and steps in place."""
    with no_grad():
        g = -g if maximize else g
        if weight_decay:
            g = g.add(p, alpha=weight_decay)
        if not momentum:
            p.add_(g, alpha=-lr)
            return
        buf = state.get("momentum_buffer")
        if buf is None:
            buf = state["momentum_buffer"] = g.clone().detach()
        else:
            buf.mul_(momentum).add_(g, alpha=1 - dampening)
        p.add_(g.add(buf, alpha=momentum) if nesterov else buf, alpha=-lr)


def _update(x, g, b, first, *, lr, momentum, dampening, weight_decay, nesterov, foreach=False):
    """One parameter's SGD step in place, in array operations."""
    if getattr(x, "dtype", None) in _LOW:
        if foreach and type(x) is np.ndarray:   # PyTorch's CPU _foreach_mul_ rounds its factor
            momentum_factor = float(np.asarray(momentum, x.dtype))
        else:
            momentum_factor = momentum
        return _update_16_bit(x, g, b, first, lr=lr, momentum=momentum, dampening=dampening,
                              weight_decay=weight_decay, nesterov=nesterov,
                              momentum_factor=momentum_factor)
    if weight_decay:
        g = g + weight_decay * x
    if momentum:
        if first:       # PyTorch starts a differentiable buffer detached from the graph,
            if isinstance(b, Tensor):   # a fresh clone (at version 0: no write counted)
                b._data[...] = g.detach()._data
            else:
                b[...] = g
        else:
            b *= momentum
            b += (1 - dampening) * g
        # a new array under foreach too: PyTorch's multi-tensor Nesterov step adds into p.grad
        # itself, against its rule that optimizers leave gradients alone (not copied)
        g = g + momentum * b if nesterov else b
    descend_(x, g, lr)


_update_foreach = functools.partial(_update, foreach=True)


def _stale_foreach(params, updates, *, lr, momentum, dampening, weight_decay, nesterov):
    """A multi-tensor step where a momentum buffer was kept from before its parameter changed
    shape: PyTorch's list ops one after another over all parameters, each shape checked, so
    that its error comes at the same op with the buffers and parameters it wrote before
    (``updates`` as ``_update`` takes them)."""
    grads = [g for _, g, _, _ in updates]
    if weight_decay:
        grads = [_plus(g, weight_decay, x, check_shapes(None, g.shape, x.shape))
                 for (x, *_), g in zip(updates, grads)]
    if momentum:
        every = not any(first for *_, first in updates)
        if every:           # _foreach_mul_ over all the buffers, then _foreach_add_
            for x, _, b, _ in updates:
                low = x.dtype in _LOW and type(x) is np.ndarray     # as _update rounds it
                _times(b, float(np.asarray(momentum, x.dtype)) if low else momentum)
        for (_, _, b, first), g in zip(updates, grads):
            if first:
                b[...] = g
                continue
            if not every:   # a new buffer among them: PyTorch steps the others one by one
                _times(b, momentum)
            _plus(b, 1 - dampening, g, check_shapes(b.shape, g.shape), out=b)
        for i, (_, _, b, _) in enumerate(updates):
            if nesterov:    # checked as PyTorch's _foreach_add_ into the gradients, written
                grads[i] = _plus(grads[i], momentum, b,     # anew (see _update)
                                 check_shapes(grads[i].shape, b.shape))
            else:
                grads[i] = b
    for (x, *_), g in zip(updates, grads):
        _plus(x, -lr, g, check_shapes(x.shape, g.shape), out=x)
    for p in params:
        p._bump_version()


def _times(a, factor):
    """``a *= factor`` as ``_update`` scales a buffer, 16-bit arrays included."""
    if a.dtype in _LOW:
        _scale(a, factor)
    else:
        a *= factor


def _plus(a, scale, b, shape, out=None):
    """``a + scale * b`` of broadcast ``shape`` (into ``out``) as ``_update`` computes it,
    16-bit arrays included."""
    if a.dtype not in _LOW:
        if out is None:
            return a + scale * b
        out += scale * b
        return out
    xp = xp_of(a)
    return _plus_scaled(xp.broadcast_to(a, shape), scale, xp.broadcast_to(b, shape), out=out)


def _update_16_bit(x, g, b, first, *, lr, momentum, dampening, weight_decay, nesterov,
                   momentum_factor):
    """``_update`` of a float16/bfloat16 parameter, rounded where PyTorch's kernels round
    (``momentum_factor`` scales the buffer: the momentum, rounded to the dtype in foreach)."""
    if weight_decay:
        g = _plus_scaled(g, weight_decay, x)
    if momentum:
        if first:
            b[...] = g
        else:
            _scale(b, momentum_factor)
            _plus_scaled(b, 1 - dampening, g, out=b)
        g = _plus_scaled(g, momentum, b) if nesterov else b
    _plus_scaled(x, -lr, g, out=x)


def _plus_scaled(a, scale, b, out=None):
    """``a + scale * b`` (into ``out`` if given) of float16/bfloat16 arrays of one shape as
    PyTorch's ``add(b, alpha=scale)``: the scale in their dtype, the rest in float32, rounded
    once (but for the scalar loop's tail). On a GPU the scale stays in float32 (opmath)."""
    cpu = type(a) is np.ndarray
    alpha = np.asarray(scale, a.dtype) if cpu else np.float32(scale)
    result = (a.astype(np.float32) + alpha.astype(np.float32) * b.astype(np.float32)).astype(
        a.dtype)
    # PyTorch's scalar loop rounds the scaled term first
    tail = a.size % TORCH_16_BIT_LANES if cpu else 0
    if cpu and a.size != b.size and min(a.size, b.size) > 1:   # (stale state: p.data = ...)
        _row_tails(result, a, alpha, b)
    elif tail:
        flat = result.reshape(-1)
        flat[-tail:] = a.reshape(-1)[-tail:] + alpha * b.reshape(-1)[-tail:]
    if out is None:
        return result
    out[...] = result
    return out


def _row_tails(result, a, alpha, b):
    """``_plus_scaled``'s scalar-loop tail where ``a`` and ``b`` broadcast: PyTorch's loop
    runs row by row over the trailing dimensions neither broadcasts (the last one where one
    does), each row's tail rounded as its scalar loop rounds."""
    shape = result.shape
    inner, k = 1, 1
    while k <= len(shape) and all(len(s) >= k and s[-k] == shape[-k] for s in (a.shape,
                                                                            b.shape)):
        inner *= shape[-k]
        k += 1
    if k == 1:
        inner = shape[-1] if shape else 1
    tail = inner % TORCH_16_BIT_LANES
    if not tail or not result.size:
        return
    rows = result.reshape(-1, inner)
    wide_a, wide_b = (np.broadcast_to(t, shape).reshape(-1, inner) for t in (a, b))
    rows[:, -tail:] = wide_a[:, -tail:] + alpha * wide_b[:, -tail:]


def _scale(a, factor):
    """``a *= factor`` of a float16/bfloat16 array as PyTorch's ``mul_(factor)``: the factor
    in float32 (NumPy rounds it to their dtype first)."""
    if isinstance(factor, float):
        a[...] = a.astype(np.float32) * np.float32(factor)
    else:
        a *= factor
