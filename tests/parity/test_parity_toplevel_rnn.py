"""``torch.lstm``/``gru``/``rnn_tanh``/``rnn_relu`` (whole recurrences from flat weights) and
``torch.native_dropout``: same results as PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_RNG = np.random.default_rng(0)


def _weights(shapes):
    return [_RNG.standard_normal(s).astype(np.float32) * 0.3 for s in shapes]


def _flat(lib, arrays):
    return [lib.tensor(a, requires_grad=True) for a in arrays]


def _lstm_shapes(inp, hid, layers, dirs, proj=0, bias=True):
    real = proj or hid
    shapes = []
    for layer in range(layers):
        size = inp if layer == 0 else real * dirs
        for _ in range(dirs):
            shapes += [(4 * hid, size), (4 * hid, real)]
            shapes += [(4 * hid,), (4 * hid,)] if bias else []
            shapes += [(proj, hid)] if proj else []
    return shapes


def _compare(call, weights, inputs):
    ours = call(ember, _flat(ember, weights), [ember.tensor(a) for a in inputs])
    theirs = call(torch, _flat(torch, weights), [torch.tensor(a) for a in inputs])
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)
    assert len(ours) == len(theirs)


def test_lstm_bidirectional_two_layers_with_projection():
    w = _weights(_lstm_shapes(3, 4, 2, 2, proj=2))
    x, h, c = (_RNG.standard_normal(s).astype(np.float32) for s in
               ((5, 2, 3), (4, 2, 2), (4, 2, 4)))
    _compare(lambda L, p, t: L.lstm(t[0], (t[1], t[2]), p, True, 2, 0.0, False, True, False),
             w, [x, h, c])


def test_gru_without_bias_batch_first():
    w = _weights([(12, 3), (12, 4)])
    x, h = _RNG.standard_normal((2, 5, 3)).astype(np.float32), np.zeros((1, 2, 4), np.float32)
    _compare(lambda L, p, t: L.gru(t[0], t[1], p, False, 1, 0.0, False, False, True), w, [x, h])


@pytest.mark.parametrize("name", ["rnn_tanh", "rnn_relu"])
def test_elman_rnn(name):
    w = _weights([(4, 3), (4, 4), (4,), (4,)])
    x, h = _RNG.standard_normal((5, 2, 3)).astype(np.float32), np.ones((1, 2, 4), np.float32)
    _compare(lambda L, p, t: getattr(L, name)(t[0], t[1], p, True, 1, 0.0, False, False, False),
             w, [x, h])


def test_gru_packed_overload():
    w = _weights([(12, 3), (12, 4), (12,), (12,)])
    data, h = _RNG.standard_normal((5, 3)).astype(np.float32), np.zeros((1, 2, 4), np.float32)
    _compare(lambda L, p, t: L.gru(t[0], L.tensor([2, 2, 1]), t[1], p, True, 1, 0.0, False,
                                   False), w, [data, h])


def test_lstm_gradients_match():
    w = _weights(_lstm_shapes(3, 4, 1, 1))
    x = _RNG.standard_normal((4, 2, 3)).astype(np.float32)
    grads = []
    for lib in (ember, torch):
        params = _flat(lib, w)
        zeros = lib.zeros(1, 2, 4)
        out, h, c = lib.lstm(lib.tensor(x), (zeros, zeros), params, True, 1, 0.0, False, False,
                             False)
        (out.sum() + c.sum()).backward()
        grads.append([p.grad.numpy() for p in params])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_native_dropout():
    for lib in (ember, torch):
        x = lib.ones(1000, requires_grad=True)
        out, mask = lib.native_dropout(x, 0.25, True)
        assert mask.dtype == lib.bool and 600 < int(mask.sum()) < 900
        assert set(out.detach().unique().tolist()) <= {0.0, float(np.float32(4 / 3))}
        assert (out.detach() != 0).tolist() == mask.tolist()
        assert type(out.grad_fn).__name__ == "NativeDropoutBackward0"
        out.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), mask.numpy() * 4 / 3, rtol=1e-6)
        same, ones = lib.native_dropout(lib.ones(3), 0.5, False)
        assert same.tolist() == [1.0] * 3 and ones.tolist() == [True] * 3
        zero, none = lib.native_dropout(lib.ones(3, dtype=lib.float64), 1.0, None)
        assert zero.tolist() == [0.0] * 3 and none.tolist() == [False] * 3
