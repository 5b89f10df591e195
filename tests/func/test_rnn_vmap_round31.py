"""vmap over recurrent cells and layers (round 31), as PyTorch's fallback treats their ATen
ops: GRU and RNN cells loop (warning with ``aten::gru_cell``, ``aten::rnn_tanh_cell``,
``aten::rnn_relu_cell``), LSTM cells and every layer raise."""

import warnings

import numpy as np
import pytest

import ember
from ember import nn
from ember.func import functional_call, vmap

B, N, IN, H, T = 3, 2, 4, 5, 6


def _inputs():
    rng = np.random.default_rng(0)
    return (ember.tensor(rng.standard_normal((B, N, IN)), dtype=ember.float32),
            ember.tensor(rng.standard_normal((B, N, H)), dtype=ember.float32))


def _fallback_names(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message).split("batching rule for ")[1].split(". Please")[0]
                 for w in caught if "performance drop" in str(w.message)]


def _tanh_cell(x, h, m):
    """A tanh RNN cell in NumPy."""
    w = {k: v.detach().numpy().astype(np.float64) for k, v in m.named_parameters()}
    return np.tanh(x @ w["weight_ih"].T + w["bias_ih"] + h @ w["weight_hh"].T + w["bias_hh"])


@pytest.mark.parametrize("batched", ["input", "state"])
def test_rnn_cell_loops_with_its_aten_name(batched):
    m = nn.RNNCell(IN, H)
    x, h = _inputs()
    fn = (lambda: vmap(lambda xx: m(xx, h[0]))(x)) if batched == "input" else \
        (lambda: vmap(lambda hh: m(x[0], hh))(h))
    out, names = _fallback_names(fn)
    assert names == ["aten::rnn_tanh_cell"]
    xs = x.numpy() if batched == "input" else np.broadcast_to(x[0].numpy(), (B, N, IN))
    hs = h.numpy() if batched == "state" else np.broadcast_to(h[0].numpy(), (B, N, H))
    np.testing.assert_allclose(out.detach().numpy(), _tanh_cell(xs, hs, m), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("kind,aten", [("GRUCell", "aten::gru_cell"),
                                       ("RNNCell_relu", "aten::rnn_relu_cell")])
def test_cells_over_batched_parameters_loop(kind, aten):
    m = nn.RNNCell(IN, H, nonlinearity="relu") if kind == "RNNCell_relu" else nn.GRUCell(IN, H)
    x, h = _inputs()
    params = {k: v.detach()[None].expand(B, *v.shape).clone() * ember.arange(1., B + 1).reshape(
        (B,) + (1,) * v.dim()) for k, v in m.named_parameters()}
    out, names = _fallback_names(lambda: vmap(
        lambda p: functional_call(m, p, (x[0], h[0])))(params))
    assert names == [aten]
    expected = ember.stack([functional_call(m, {k: v[b] for k, v in params.items()},
                                            (x[0], h[0])) for b in range(B)])
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-6)


def test_nested_vmap_over_a_gru_cell_warns_per_call():
    m = nn.GRUCell(IN, H)
    x = ember.tensor(np.random.default_rng(1).standard_normal((2, 3, N, IN)),
                     dtype=ember.float32)
    out, names = _fallback_names(lambda: vmap(vmap(m))(x))
    assert tuple(out.shape) == (2, 3, N, H)
    assert names == ["aten::gru_cell"] * 4      # the outer call, then one per outer example


def test_gru_cell_over_an_empty_batch():
    m = nn.GRUCell(IN, H)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match=r"^Batching rule not implemented for "
                           r"aten::gru_cell\. The fallback path does not support vmap over "
                           r"dims of size 0\."):
            vmap(m)(ember.zeros(0, N, IN))


_REFUSED = {
    "LSTMCell": (lambda: nn.LSTMCell(IN, H), lambda m, x, h: m(x, (h, h))[0],
                 "aten::lstm_cell"),
    "lstm_cell": (lambda: None, lambda m, x, h: ember.lstm_cell(
        x, (h, h), ember.ones(4 * H, IN), ember.ones(4 * H, H))[0], "aten::lstm_cell"),
    "LSTM": (lambda: nn.LSTM(IN, H), lambda m, x, h: m(x.expand(T, N, IN))[0],
             "aten::lstm.input"),
    "LSTM_proj": (lambda: nn.LSTM(IN, H, proj_size=2), lambda m, x, h: m(x.expand(T, N, IN))[0],
                  "aten::lstm.input"),
    "GRU": (lambda: nn.GRU(IN, H, num_layers=2), lambda m, x, h: m(x.expand(T, N, IN))[0],
            "aten::gru.input"),
    "RNN": (lambda: nn.RNN(IN, H, bidirectional=True),
            lambda m, x, h: m(x.expand(T, N, IN))[0], "aten::rnn_tanh.input"),
    "RNN_relu": (lambda: nn.RNN(IN, H, nonlinearity="relu"),
                 lambda m, x, h: m(x.expand(T, N, IN), h[None])[0], "aten::rnn_relu.input"),
}


@pytest.mark.parametrize("batched", ["input", "state"])
@pytest.mark.parametrize("name", sorted(_REFUSED))
def test_lstm_cells_and_layers_are_refused(name, batched):
    make, fn, aten = _REFUSED[name]
    m = make()
    x, h = _inputs()
    run = (lambda: vmap(lambda xx: fn(m, xx, h[0]))(x)) if batched == "input" else \
        (lambda: vmap(lambda hh: fn(m, x[0], hh))(h))
    if batched == "state" and name in ("LSTM", "LSTM_proj", "GRU", "RNN"):
        out, names = _fallback_names(run)   # the state is not used: nothing is batched
        assert names == [] and out.shape[0] == B
        return
    with pytest.raises(RuntimeError, match=f"^Batching rule not implemented for {aten}\\. "
                       f"We could not generate a fallback\\."):
        _fallback_names(run)


def test_layers_run_outside_vmap_after_a_refusal():
    m, lstm, gru = nn.GRUCell(IN, H), nn.LSTMCell(IN, H), nn.GRU(IN, H)
    x, h = _inputs()
    with pytest.raises(RuntimeError, match="aten::lstm_cell"):
        vmap(lambda xx: lstm(xx)[0])(x)
    # the cell marker was reset: a layer called next is named as a layer
    with pytest.raises(RuntimeError, match=r"aten::gru\.input"):
        vmap(lambda xx: gru(xx.expand(T, N, IN))[0])(x)
    assert tuple(m(x[0], h[0]).shape) == (N, H)
