"""``torch.lstm``, ``torch.gru``, ``torch.rnn_tanh`` and ``torch.rnn_relu``: a whole
multi-layer recurrence from a flat list of weights, as ``nn.LSTM`` & co. run it."""

from types import SimpleNamespace

import ember
from ember.nn.modules.rnn import RNNBase, warn_lstm_projections

__all__ = ["lstm", "gru", "rnn_tanh", "rnn_relu"]


def _layout(mode, params, has_biases, num_layers, bidirectional, dropout, train):
    """A stand-in for the module ``RNNBase._layers`` reads: weights grouped per layer and
    direction (``w_ih, w_hh[, b_ih, b_hh][, w_hr]``)."""
    directions = 2 if bidirectional else 1
    per = len(params) // (num_layers * directions)
    base = 4 if has_biases else 2
    if per not in (base, base + 1) or per * num_layers * directions != len(params):
        raise RuntimeError(f"{mode.lower()}: expected {num_layers * directions * base} "
                           f"weights, got {len(params)}")
    groups = [list(params[k * per:(k + 1) * per]) for k in range(num_layers * directions)]
    return SimpleNamespace(mode=mode, num_layers=num_layers, bidirectional=bool(bidirectional),
                           all_weights=groups, proj_size=int(per > base), bias=bool(has_biases),
                           training=bool(train), dropout=float(dropout))


def _run(mode, input, batch_sizes, h0, c0, params, has_biases, num_layers, dropout, train,
         bidirectional, batch_first):
    """``(output, h_n, c_n)`` of a padded (``batch_sizes`` None) or packed input."""
    layout = _layout(mode, params, has_biases, num_layers, bidirectional, dropout, train)
    if batch_sizes is not None:
        sizes = tuple(int(b) for b in batch_sizes.tolist())
        return RNNBase._layers(layout, input, h0, c0, sizes)
    warn_lstm_projections(layout, input)
    x = input.transpose(0, 1) if batch_first else input
    steps, batch = x.shape[0], x.shape[1]
    out, h, c = RNNBase._layers(layout, x.reshape(steps * batch, x.shape[2]), h0, c0,
                                (batch,) * steps)
    out = out.reshape(steps, batch, out.shape[-1])
    return (out.transpose(0, 1) if batch_first else out), h, c


def _split_packed(args):
    """``(input, batch_sizes, hx, rest)`` from either overload: ``(input, hx, params, ...,
    batch_first)`` or ``(data, batch_sizes, hx, params, ...)``."""
    if isinstance(args[1], ember.Tensor) and not args[1].is_floating_point():  # batch sizes
        return args[0], args[1], args[2], list(args[3:]) + [False]
    return args[0], None, args[1], list(args[2:])


def lstm(*args):
    """A multi-layer LSTM over a sequence: ``(output, h_n, c_n)`` (``torch.lstm``)."""
    input, batch_sizes, hx, rest = _split_packed(args)
    return _run("LSTM", input, batch_sizes, hx[0], hx[1], *rest)


def _single_state(mode, args):
    input, batch_sizes, hx, rest = _split_packed(args)
    out, h, _ = _run(mode, input, batch_sizes, hx, None, *rest)
    return out, h


def gru(*args):
    """A multi-layer GRU over a sequence: ``(output, h_n)`` (``torch.gru``)."""
    return _single_state("GRU", args)


def rnn_tanh(*args):
    """A multi-layer tanh RNN over a sequence: ``(output, h_n)`` (``torch.rnn_tanh``)."""
    return _single_state("RNN_TANH", args)


def rnn_relu(*args):
    """A multi-layer relu RNN over a sequence: ``(output, h_n)`` (``torch.rnn_relu``)."""
    return _single_state("RNN_RELU", args)
