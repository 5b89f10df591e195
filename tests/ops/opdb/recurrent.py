"""OpInfo entries for the recurrent layer op (``_rnn_layer``), and the NumPy transcription
of the cell equations that tests/nn/test_rnn.py also uses."""

import numpy as np

import ember
from ember.ops.recurrent import rnn_layer
from tests.ops.opdb.core import ErrorInput, OpInfo, SampleInput, make


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def np_cell(mode, x, h, c, w_ih, w_hh, b_ih, b_hh, w_hr=None):
    """One step of ``mode`` as PyTorch documents it: returns (h', c')."""
    gi = x @ w_ih.T + (0 if b_ih is None else b_ih)
    gh = h @ w_hh.T + (0 if b_hh is None else b_hh)
    if mode == "LSTM":
        i, f, g, o = np.split(gi + gh, 4, axis=-1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        return (h if w_hr is None else h @ w_hr.T), c
    if mode == "GRU":
        ir, iz, in_ = np.split(gi, 3, axis=-1)
        hr, hz, hn = np.split(gh, 3, axis=-1)
        r, z = _sigmoid(ir + hr), _sigmoid(iz + hz)
        n = np.tanh(in_ + r * hn)
        return (1 - z) * n + z * h, None
    pre = gi + gh
    return (np.tanh(pre) if mode == "RNN_TANH" else np.maximum(pre, 0)), None


def _layer_ref(x, hx, w_hh, cx=None, b_hh=None, w_hr=None, mode="LSTM", batch_sizes=(),
               reverse=False):
    """The op on packed projections: steps in order (reversed), each on its first rows."""
    eye = np.eye(x.shape[1])
    offsets = np.concatenate([[0], np.cumsum(batch_sizes)]).astype(int)
    order = range(len(batch_sizes) - 1, -1, -1) if reverse else range(len(batch_sizes))
    h, c = hx.copy(), None if cx is None else cx.copy()
    out = np.zeros((x.shape[0], hx.shape[1]))
    for t in order:
        o, bs = offsets[t], batch_sizes[t]
        hn, cn = np_cell(mode, x[o:o + bs], h[:bs], None if c is None else c[:bs], eye, w_hh,
                         None, b_hh, w_hr)
        out[o:o + bs] = hn
        h[:bs] = hn
        if c is not None:
            c[:bs] = cn
    return (out, h) if c is None else (out, h, c)


def _layer(x, hx, w_hh, cx=None, b_hh=None, w_hr=None, mode="LSTM", batch_sizes=(),
           reverse=False):
    out = rnn_layer(x, hx, w_hh, cx, b_hh, w_hr, mode=mode, batch_sizes=batch_sizes,
                    reverse=reverse)
    return out if mode == "LSTM" else out[:2]


_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _sample(mode, dtype, rg, sizes, hidden, proj=0, bias=True, reverse=False,
            noncontiguous=False):
    p = proj or hidden
    g = _GATES[mode] * hidden
    x = make((sum(sizes), g), dtype, rg, low=-2, high=2, noncontiguous=noncontiguous)
    kwargs = {"mode": mode, "batch_sizes": sizes, "reverse": reverse}
    args = (make((sizes[0], p), dtype, rg, low=-2, high=2),
            make((g, p), dtype, rg, low=-1, high=1),
            make((sizes[0], hidden), dtype, rg, low=-2, high=2) if mode == "LSTM" else None,
            make((g,), dtype, rg, low=-1, high=1) if bias else None,
            make((p, hidden), dtype, rg, low=-1, high=1) if proj else None)
    name = f"{mode}{list(sizes)}{'_rev' if reverse else ''}{'_proj' if proj else ''}"
    return SampleInput(x, args, kwargs, name=name)


def _samples(dtype, requires_grad):
    for mode in ("LSTM", "GRU", "RNN_TANH", "RNN_RELU"):
        yield _sample(mode, dtype, requires_grad, (2, 2, 2), 3)
        yield _sample(mode, dtype, requires_grad, (3, 2, 2, 1), 2, reverse=True)
        yield _sample(mode, dtype, requires_grad, (2, 1), 2, bias=False, noncontiguous=True)
    yield _sample("LSTM", dtype, requires_grad, (3, 3, 1), 3, proj=2)
    yield _sample("LSTM", dtype, requires_grad, (2, 2), 3, proj=1, reverse=True)
    yield _sample("GRU", dtype, requires_grad, (0,), 2)


def _gradgrad_samples(dtype, requires_grad):
    """Tiny instances (gradgradcheck skips inputs of more than 12 elements)."""
    for mode in ("LSTM", "GRU", "RNN_TANH", "RNN_RELU"):
        hidden = 1 if mode in ("LSTM", "GRU") else 2
        yield _sample(mode, dtype, requires_grad, (2, 1), hidden, reverse=mode == "GRU")
    yield _sample("LSTM", dtype, requires_grad, (1,), 2, proj=1)


def _errors():
    x, h, w = ember.zeros(4, 4), ember.zeros(2, 1), ember.zeros(4, 1)
    c = ember.zeros(2, 1)
    yield ErrorInput(SampleInput(x, (h, w, c), {"mode": "LSTX", "batch_sizes": (2, 2)}),
                     RuntimeError, "Unrecognized RNN mode: LSTX")
    yield ErrorInput(SampleInput(x, (h, w, c), {"mode": "LSTM", "batch_sizes": (2, 1)}),
                     RuntimeError, "do not describe 4 packed rows")
    yield ErrorInput(SampleInput(x, (h, w, c), {"mode": "LSTM", "batch_sizes": (1, 3)}),
                     RuntimeError, "in decreasing batches")
    yield ErrorInput(SampleInput(x, (h, w), {"mode": "LSTM", "batch_sizes": (2, 2)}),
                     RuntimeError, "mode LSTM needs cell state cx")


OPS = [
    OpInfo("_rnn_layer", _layer_ref, _samples, op=_layer, error_inputs=_errors),
    # gradgradcheck on tiny instances (the generic test skips inputs over 12 elements)
    OpInfo("_rnn_layer", _layer_ref, _gradgrad_samples, op=_layer, gradgrad=True,
           dtypes=(ember.float64,), skips=("forward", "inplace", "out", "errors", "grad")),
]
