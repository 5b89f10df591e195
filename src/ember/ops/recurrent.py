"""The recurrence of one RNN/LSTM/GRU layer in one direction, as one op (``_rnn_layer``).

Layers compute the input projections of all time steps with one matmul, then call this op:
its forward runs the time loop on arrays (one GEMM ``h @ W_hh^T`` per step for all gates,
fused gate nonlinearities) and keeps a workspace of gate activations and previous states,
as PyTorch's fused RNN kernels do. Its derivative runs backpropagation through time on
arrays. When the derivative itself must be differentiable (``create_graph=True``), it
differentiates the same recurrence written with ember ops instead, so double backward works.
"""

import threading

import numpy as np

import ember
from ember.amp._cache import cast_weight
from ember.ops import _rnn_kernels as K
from ember.backend import cudnn_tf32, xp_of
from ember.ops._norm_shared import _outside_vmap
from ember.ops._registry import op

FUNCTIONAL = {}

MODES = ("RNN_TANH", "RNN_RELU", "LSTM", "GRU")


def _steps(batch_sizes, reverse):
    """``(offset, batch)`` of each step in processing order."""
    steps, offset = [], 0
    for bs in batch_sizes:
        steps.append((offset, bs))
        offset += bs
    return steps[::-1] if reverse else steps


def _check(x, hx, w_hh, cx, mode, batch_sizes):
    if mode not in MODES:
        raise RuntimeError(f"Unrecognized RNN mode: {mode}")
    if sum(batch_sizes) != x.shape[0] or any(
            a < b for a, b in zip(batch_sizes, batch_sizes[1:])):
        raise RuntimeError(f"_rnn_layer(): batch_sizes {list(batch_sizes)} do not describe "
                           f"{x.shape[0]} packed rows in decreasing batches")
    if (mode == "LSTM") != (cx is not None):
        raise RuntimeError(f"_rnn_layer(): mode {mode} {'needs' if mode == 'LSTM' else 'takes no'}"
                           f" cell state cx")


@op("_rnn_layer(input, hx, weight_hh, cx=None, bias_hh=None, weight_hr=None, mode='LSTM', "
    "batch_sizes=(), reverse=False)",
    inputs=("input", "hx", "weight_hh", "cx", "bias_hh", "weight_hr"), method=False)
def _rnn_layer(xp, x, hx, w_hh, cx, b_hh, w_hr, mode, batch_sizes, reverse):
    """One recurrent layer in one direction over packed input projections.

    ``input`` is ``(sum(batch_sizes), gates * hidden_size)``: the projections
    ``x_t W_ih^T (+ b_ih)`` of each step's rows, steps one after another, batches
    non-increasing. Returns ``(output, h_n, c_n, workspace)`` for LSTM and
    ``(output, h_n, workspace)`` otherwise; the workspace (bytes) holds what the backward
    needs and is not differentiable.
    """
    _check(x, hx, w_hh, cx, mode, batch_sizes)
    steps = _steps(batch_sizes, reverse)
    with cudnn_tf32(xp):                # PyTorch's recurrent layers run in cuDNN
        if mode == "LSTM":
            out, h, c, ws = K.lstm_forward(xp, x, hx, cx, w_hh, b_hh, w_hr, steps)
            return out, h, c, ws.view(np.uint8)
        if mode == "GRU":
            out, h, _, ws = K.gru_forward(xp, x, hx, w_hh, b_hh, steps)
        else:
            out, h, _, ws = K.rnn_forward(xp, x, hx, w_hh, b_hh, steps, mode == "RNN_RELU")
            ws = xp.concatenate([ws, out])  # backward reads the outputs from here, not out[0]
    return out, h, ws.view(np.uint8)


# Only the workspace is kept: the outputs may change in place before backward, as in PyTorch
@_rnn_layer.derivative(outputs=(-1,))
def _(grads, x, hx, w_hh, cx, b_hh, w_hr, mode, batch_sizes, reverse, *, out):
    inputs = (x, hx, w_hh, cx, b_hh, w_hr)
    if ember.is_grad_enabled():
        return _differentiable_grads(grads, inputs, mode, batch_sizes, reverse)
    if not _outside_vmap():     # (batched cotangents: their _data is a placeholder)
        return _batched_grads(grads, inputs, mode, batch_sizes, reverse)
    from ember._tensor import _make
    steps = _steps(batch_sizes, reverse)
    ws = out[-1]._data.view(x._data.dtype)      # (rows, bytes) -> (rows, columns)
    xp = xp_of(ws)
    d = [g._data for g in grads[:-1]]
    # The kernels backpropagate J^T g; for complex (holomorphic) cells PyTorch's convention
    # wants conj(J)^T g = conj(J^T conj(g)).
    flip = ws.dtype.kind == "c"
    if flip:
        d = [g.conj() for g in d]
    w = [None if t is None else t._data for t in (w_hh, b_hh, w_hr)]
    with cudnn_tf32(xp):
        if mode == "LSTM":
            res = K.lstm_backward(xp, d[0], d[1], d[2], ws, *w, steps)
        elif mode == "GRU":
            res = K.gru_backward(xp, d[0], d[1], ws, w[0], w[1], steps)
        else:
            n = x.shape[0]                      # the workspace: previous states, outputs
            res = K.rnn_backward(xp, d[0], d[1], ws[n:], ws[:n], w[0], w[1], steps,
                                 mode == "RNN_RELU")
    return tuple(None if r is None else _make(r.conj() if flip else r) for r in res)


def _differentiable_grads(grads, inputs, mode, batch_sizes, reverse):
    """The gradients as a graph: autograd of the recurrence written with ember ops."""
    # (the recorded truth: a forward-mode transform's tensors report no requires_grad)
    wanted = [t is not None and (t._requires_grad or t._grad_fn is not None) for t in inputs]
    outs = recurrence(*inputs, mode=mode, batch_sizes=batch_sizes, reverse=reverse)
    found = ember.autograd.grad(outs, [t for t, w in zip(inputs, wanted) if w],
                                grad_outputs=list(grads[:len(outs)]), create_graph=True,
                                allow_unused=True)
    it = iter(found)
    return tuple(next(it) if w else None for w in wanted)


def _batched_grads(grads, inputs, mode, batch_sizes, reverse):
    """The gradients under vmap (jacrev, vmap of a vjp): autograd of the recurrence written
    with ember ops, which batch, from detached copies of the inputs."""
    leaves = [None if t is None else t.detach().requires_grad_() for t in inputs]
    with ember.enable_grad():
        outs = recurrence(*leaves, mode=mode, batch_sizes=batch_sizes, reverse=reverse)
        found = iter(ember.autograd.grad(outs, [t for t in leaves if t is not None],
                                         grad_outputs=list(grads[:len(outs)]),
                                         allow_unused=True))
    return tuple(None if t is None else next(found) for t in leaves)


def recurrence(x, hx, w_hh, cx=None, b_hh=None, w_hr=None, *, mode, batch_sizes, reverse):
    """``_rnn_layer`` written with ember ops (no workspace): ``(output, h_n[, c_n])``."""
    steps = _steps(batch_sizes, reverse)
    h, c = hx, cx
    outs = {}
    w_t = cast_weight(w_hh).t()     # cast, then transposed, as PyTorch's linear does
    for o, bs in steps:
        hp, gx = h[:bs], x[o:o + bs]
        # one linear map, as PyTorch's cells compute it (under autocast, in one dtype)
        gh = hp.matmul(w_t) if b_hh is None else ember.addmm(b_hh, hp, w_t)
        if mode == "LSTM":
            i, f, g, og = (gx + gh).chunk(4, 1)
            cn = f.sigmoid() * c[:bs] + i.sigmoid() * g.tanh()
            hn = og.sigmoid() * cn.tanh()
            if w_hr is not None:
                hn = hn.matmul(w_hr.t())
            c = _update(c, cn, bs)
        elif mode == "GRU":
            xr, xz, xn = gx.chunk(3, 1)
            hr, hz, hh = gh.chunk(3, 1)
            r, z = (xr + hr).sigmoid(), (xz + hz).sigmoid()
            n = (xn + r * hh).tanh()
            hn = n + z * (hp - n)
        else:
            a = gx + gh
            hn = a.tanh() if mode == "RNN_TANH" else a.clamp(min=0)
        h = _update(h, hn, bs)
        outs[o] = hn
    output = ember.cat([outs[o] for o in sorted(outs)])
    return (output, h, c) if mode == "LSTM" else (output, h)


def _update(state, new, bs):
    return new if bs == state.shape[0] else ember.cat([new, state[bs:]])


def rnn_layer(x, hx, w_hh, cx=None, b_hh=None, w_hr=None, *, mode, batch_sizes,
              reverse=False):
    """Run ``_rnn_layer``; returns ``(output, h_n, c_n)`` (c_n None unless LSTM)."""
    res = _rnn_layer(x, hx, w_hh, cx, b_hh, w_hr, mode, tuple(batch_sizes), reverse)
    return (res[0], res[1], res[2]) if mode == "LSTM" else (res[0], res[1], None)


class _Cells(threading.local):
    # how many cell steps (PyTorch's lstm_cell, gru_cell, ... ops) run ``_rnn_layer`` now
    running = 0


CELLS = _Cells()


def cell_layer(x, hx, w_hh, cx=None, b_hh=None, w_hr=None, *, mode, batch_sizes,
               reverse=False):
    """``rnn_layer`` for one step of a cell, which vmap's fallback names as PyTorch's
    ``aten::<mode>_cell`` (a layer's as ``aten::<mode>.input``)."""
    CELLS.running += 1
    try:
        return rnn_layer(x, hx, w_hh, cx, b_hh, w_hr, mode=mode, batch_sizes=batch_sizes,
                         reverse=reverse)
    finally:
        CELLS.running -= 1
