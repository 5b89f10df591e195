"""RNN, LSTM, GRU and the cells: construction, parameters, init, values against a NumPy
transcription of the equations, gradients, dropout, and PyTorch's errors."""

import math

import numpy as np
import pytest

import ember
from ember import nn
from tests.ops.opdb.recurrent import np_cell


def _np(t):
    return None if t is None else np.asarray(t.detach()).astype(np.float64)


def np_module(m, x, hx=None):
    """A layer's forward in NumPy on batched (T, B, I) input, from its own weights."""
    mode = m.mode
    dirs = 2 if m.bidirectional else 1
    hidden = m.proj_size or m.hidden_size
    steps, batch = x.shape[:2]
    if hx is None:
        h0 = np.zeros((m.num_layers * dirs, batch, hidden))
        c0 = np.zeros((m.num_layers * dirs, batch, m.hidden_size))
    else:
        h0, c0 = (hx if mode == "LSTM" else (hx, None))
    hs, cs = [], []
    layer_in = x
    for layer in range(m.num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            w = {n: _np(getattr(m, n + sfx, None))
                 for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")}
            h, c = h0[k], None if c0 is None else c0[k]
            out = np.zeros((steps, batch, hidden))
            for t in (range(steps - 1, -1, -1) if d else range(steps)):
                h, c = np_cell(mode, layer_in[t], h, c, w["weight_ih"], w["weight_hh"],
                               w["bias_ih"], w["bias_hh"], w["weight_hr"])
                out[t] = h
            outs.append(out)
            hs.append(h)
            cs.append(c)
        layer_in = np.concatenate(outs, -1)
    if mode == "LSTM":
        return layer_in, (np.stack(hs), np.stack(cs))
    return layer_in, np.stack(hs)


def _close(got, want, tol=1e-10):
    got = np.asarray(got.detach())
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


CONFIGS = [
    ("RNN", {}), ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
    ("RNN", {"bias": False, "bidirectional": True}),
    ("LSTM", {}), ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"proj_size": 2, "num_layers": 2, "bidirectional": True}),
    ("LSTM", {"bias": False}), ("GRU", {}), ("GRU", {"num_layers": 2, "bidirectional": True}),
    ("GRU", {"bias": False}),
]


@pytest.mark.parametrize("name,kw", CONFIGS)
def test_forward_matches_numpy(name, kw):
    ember.manual_seed(0)
    m = getattr(nn, name)(3, 4, dtype=ember.float64, **kw)
    x = ember.randn(5, 2, 3, dtype=ember.float64)
    out, hidden = m(x)
    want_out, want_hidden = np_module(m, _np(x))
    _close(out, want_out)
    if name == "LSTM":
        _close(hidden[0], want_hidden[0])
        _close(hidden[1], want_hidden[1])
    else:
        _close(hidden, want_hidden)


def test_lstm_given_states_batch_first_and_unbatched():
    ember.manual_seed(1)
    m = nn.LSTM(3, 4, num_layers=2, batch_first=True, dtype=ember.float64)
    x = ember.randn(2, 5, 3, dtype=ember.float64)
    h0 = ember.randn(2, 2, 4, dtype=ember.float64)
    c0 = ember.randn(2, 2, 4, dtype=ember.float64)
    out, (h, c) = m(x, (h0, c0))
    want, (wh, wc) = np_module(m, _np(x).transpose(1, 0, 2), (_np(h0), _np(c0)))
    _close(out, want.transpose(1, 0, 2))
    _close(h, wh)
    _close(c, wc)
    out1, (h1, c1) = m(x[0], (h0[:, 0], c0[:, 0]))       # unbatched: (L, I)
    assert out1.shape == (5, 4) and h1.shape == (2, 4) and c1.shape == (2, 4)
    _close(out1, want.transpose(1, 0, 2)[0])
    _close(h1, wh[:, 0])


def test_gru_unbatched_with_hidden():
    ember.manual_seed(2)
    m = nn.GRU(3, 4, dtype=ember.float64)
    x = ember.randn(6, 3, dtype=ember.float64)
    h0 = ember.randn(1, 4, dtype=ember.float64)
    out, h = m(x, h0)
    want, wh = np_module(m, _np(x)[:, None], _np(h0)[:, None])
    _close(out, want[:, 0])
    _close(h, wh[:, 0])


@pytest.mark.parametrize("name,kw", [("LSTM", {"proj_size": 1, "bidirectional": True}),
                                     ("GRU", {"num_layers": 2}), ("RNN", {})])
def test_gradcheck_module(name, kw):
    _gradcheck_layer(name, kw, ember.float64, batch=2, seed=3)


def _gradcheck_layer(name, kw, dtype, batch, seed):
    ember.manual_seed(seed)
    m = getattr(nn, name)(2, 2, dtype=dtype, **kw)
    params = list(m.parameters())
    x = ember.randn(3, batch, 2, dtype=dtype, requires_grad=True)
    # parameters enter through a functional call so gradcheck can perturb them
    assert ember.autograd.gradcheck(lambda x, *ps: _functional(m, x, ps),
                                    [x] + [p.detach().clone().requires_grad_() for p in params])


def _functional(m, x, values):
    """Run ``m`` with its parameters replaced by ``values`` (tensors in the graph)."""
    saved = {}
    for (name, p), v in zip(list(m.named_parameters()), values):
        saved[name] = p
        m._parameters[name] = v
    try:
        out, hidden = m(x)
    finally:
        m._parameters.update(saved)
    hidden = hidden if isinstance(hidden, tuple) else (hidden,)
    return (out,) + hidden


def test_double_backward_through_lstm():
    ember.manual_seed(4)
    m = nn.LSTM(2, 2, dtype=ember.float64)
    x = ember.randn(2, 1, 2, dtype=ember.float64, requires_grad=True)
    assert ember.autograd.gradgradcheck(lambda x: m(x)[0], [x])


def test_backward_grads_match_numpy_finite_differences_in_float32():
    ember.manual_seed(5)
    m = nn.LSTM(3, 4, num_layers=2)
    x = ember.randn(4, 2, 3, requires_grad=True)
    out, (h, c) = m(x)
    (out.sum() + c.sum()).backward()
    w = m.weight_hh_l0
    eps = 1e-3
    i, j = 5, 2

    def loss():
        o, (_, cc) = m(x)
        return float(o.sum() + cc.sum())
    with ember.no_grad():
        w[i, j] += eps
        up = loss()
        w[i, j] -= 2 * eps
        down = loss()
        w[i, j] += eps
    assert abs((up - down) / (2 * eps) - float(w.grad[i, j])) < 2e-2


# ----- construction -----------------------------------------------------------------------

def test_parameter_names_and_shapes():
    m = nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2)
    shapes = {n: tuple(p.shape) for n, p in m.named_parameters()}
    assert list(shapes)[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                "weight_hr_l0"]
    assert shapes["weight_ih_l0"] == (16, 3) and shapes["weight_hh_l0"] == (16, 2)
    assert shapes["weight_hr_l0_reverse"] == (2, 4)
    assert shapes["weight_ih_l1"] == (16, 4)          # 2 directions x proj_size
    assert len(shapes) == 20
    g = nn.GRU(5, 6, bias=False)
    assert {n: tuple(p.shape) for n, p in g.named_parameters()} == {
        "weight_ih_l0": (18, 5), "weight_hh_l0": (18, 6)}
    assert [[tuple(p.shape) for p in ws] for ws in g.all_weights] == [[(18, 5), (18, 6)]]
    assert g._flat_weights_names == ["weight_ih_l0", "weight_hh_l0"]
    c = nn.LSTMCell(3, 4)
    assert {n: tuple(p.shape) for n, p in c.named_parameters()} == {
        "weight_ih": (16, 3), "weight_hh": (16, 4), "bias_ih": (16,), "bias_hh": (16,)}
    assert nn.GRUCell(3, 4, bias=False).bias_ih is None


def test_defaults_and_repr():
    m = nn.LSTM(10, 20)
    assert (m.num_layers, m.bias, m.batch_first, m.dropout, m.bidirectional, m.proj_size) == \
        (1, True, False, 0.0, False, 0)
    assert repr(m) == "LSTM(10, 20)"
    assert repr(nn.LSTM(10, 20, 2, batch_first=True, bidirectional=True, dropout=0.1,
                        proj_size=5)) == ("LSTM(10, 20, proj_size=5, num_layers=2, "
                                          "batch_first=True, dropout=0.1, bidirectional=True)")
    assert repr(nn.RNN(10, 20, nonlinearity="relu", bias=False)) == "RNN(10, 20, bias=False)"
    assert nn.RNN(10, 20, 1, "relu").mode == "RNN_RELU"
    assert repr(nn.GRU(3, 4)) == "GRU(3, 4)"
    assert repr(nn.RNNCell(3, 4, bias=False, nonlinearity="relu")) == \
        "RNNCell(3, 4, bias=False, nonlinearity=relu)"
    assert repr(nn.LSTMCell(3, 4)) == "LSTMCell(3, 4)"
    assert nn.LSTM(3, 4).flatten_parameters() is None


def test_init_is_uniform_within_one_over_sqrt_hidden():
    ember.manual_seed(6)
    m = nn.LSTM(64, 100, num_layers=2)
    bound = 1 / math.sqrt(100)
    values = np.concatenate([np.asarray(p.detach()).ravel() for p in m.parameters()])
    assert values.min() >= -bound and values.max() <= bound
    assert abs(values.mean()) < 0.05 * bound
    assert abs(values.std() - bound / math.sqrt(3)) < 0.02 * bound
    cell = nn.GRUCell(8, 400)
    assert float(cell.weight_hh.abs().max()) <= 1 / 20


def test_factory_kwargs_and_dtype_mismatch():
    m = nn.GRU(3, 4, dtype=ember.float64)
    assert all(p.dtype is ember.float64 for p in m.parameters())
    with pytest.raises(ValueError, match=r"RNN input dtype \(ember.float32\) does not match "
                                         r"weight dtype \(ember.float64\)"):
        m(ember.randn(2, 1, 3))


def test_dropout_between_layers_only_in_training():
    ember.manual_seed(7)
    m = nn.LSTM(3, 8, num_layers=2, dropout=0.5)
    x = ember.randn(4, 2, 3)
    a, _ = m(x)
    b, _ = m(x)
    assert not np.allclose(np.asarray(a.detach()), np.asarray(b.detach()))
    m.eval()
    c, _ = m(x)
    d, _ = m(x)
    np.testing.assert_array_equal(np.asarray(c.detach()), np.asarray(d.detach()))
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.2)


def test_dropout_zero_in_training_is_deterministic():
    m = nn.RNN(3, 4, num_layers=2)
    x = ember.randn(4, 2, 3)
    np.testing.assert_array_equal(np.asarray(m(x)[0].detach()), np.asarray(m(x)[0].detach()))


def test_empty_batch_and_zero_length():
    m = nn.LSTM(2, 3)
    out, (h, c) = m(ember.randn(4, 0, 2))
    assert out.shape == (4, 0, 3) and h.shape == (1, 0, 3)
    with pytest.raises(RuntimeError, match="Expected sequence length to be larger than 0"):
        m(ember.randn(0, 3, 2))


# ----- cells --------------------------------------------------------------------------------

@pytest.mark.parametrize("cls,mode", [(nn.RNNCell, "RNN_TANH"), (nn.LSTMCell, "LSTM"),
                                      (nn.GRUCell, "GRU")])
def test_cells_match_numpy(cls, mode):
    ember.manual_seed(8)
    cell = cls(3, 4, dtype=ember.float64)
    x = ember.randn(2, 3, dtype=ember.float64)
    h = ember.randn(2, 4, dtype=ember.float64)
    c = ember.randn(2, 4, dtype=ember.float64)
    w = [_np(p) for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)]
    if mode == "LSTM":
        got = cell(x, (h, c))
        want = np_cell(mode, _np(x), _np(h), _np(c), *w)
        _close(got[0], want[0])
        _close(got[1], want[1])
        unbatched = cell(x[1], (h[1], c[1]))
        _close(unbatched[0], want[0][1])
        zero = cell(x)
        _close(zero[0], np_cell(mode, _np(x), 0 * _np(h), 0 * _np(c), *w)[0])
    else:
        _close(cell(x, h), np_cell(mode, _np(x), _np(h), None, *w)[0])
        _close(cell(x[0], h[0]), np_cell(mode, _np(x), _np(h), None, *w)[0][0])
        _close(cell(x), np_cell(mode, _np(x), 0 * _np(h), None, *w)[0])


def test_relu_cell_and_gradcheck():
    ember.manual_seed(9)
    cell = nn.RNNCell(3, 2, nonlinearity="relu", dtype=ember.float64)
    x = ember.randn(2, 3, dtype=ember.float64, requires_grad=True)
    h = ember.randn(2, 2, dtype=ember.float64, requires_grad=True)
    w = [_np(p) for p in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)]
    _close(cell(x, h), np_cell("RNN_RELU", _np(x), _np(h), None, *w)[0])
    gru = nn.GRUCell(3, 2, dtype=ember.float64)
    assert ember.autograd.gradcheck(lambda x, h: gru(x, h), [x, h])


# ----- errors (PyTorch's words) ------------------------------------------------------------

def test_layer_errors():
    m = nn.LSTM(10, 20, 2)
    with pytest.raises(RuntimeError, match=r"input.size\(-1\) must be equal to input_size. "
                                           r"Expected 10, got 5"):
        m(ember.randn(5, 3, 5))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(2, 3, 20\), got "
                                           r"\[1, 3, 20\]"):
        m(ember.randn(5, 3, 10), (ember.randn(1, 3, 20), ember.randn(2, 3, 20)))
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(2, 3, 20\), got "
                                           r"\[2, 4, 20\]"):
        m(ember.randn(5, 3, 10), (ember.randn(2, 3, 20), ember.randn(2, 4, 20)))
    with pytest.raises(RuntimeError, match="For batched 3-D input, hx and cx should also be "
                                           r"3-D but got \(2-D, 2-D\) tensors"):
        m(ember.randn(5, 3, 10), (ember.randn(3, 20), ember.randn(3, 20)))
    with pytest.raises(ValueError, match="LSTM: Expected input to be 2D or 3D, got 4D instead"):
        m(ember.randn(2, 5, 3, 10))
    g = nn.GRU(10, 20)
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 3, 20\), got "
                                           r"\[2, 3, 20\]"):
        g(ember.randn(5, 3, 10), ember.randn(2, 3, 20))
    with pytest.raises(RuntimeError, match="For batched 3-D input, hx should also be 3-D but "
                                           "got 2-D tensor"):
        g(ember.randn(5, 3, 10), ember.randn(3, 20))
    with pytest.raises(ValueError, match="RNN: Expected input to be 2D or 3D, got 1D tensor "
                                         "instead"):
        nn.RNN(10, 20)(ember.randn(10))


def test_constructor_errors():
    with pytest.raises(ValueError, match="Unknown nonlinearity 'foo'. Select from 'tanh' or "
                                         "'relu'."):
        nn.RNN(10, 20, nonlinearity="foo")
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(10, 20, proj_size=20)
    with pytest.raises(ValueError, match="proj_size should be a positive integer or zero"):
        nn.LSTM(10, 20, proj_size=-1)
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        nn.GRU(10, 20, proj_size=2)
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.LSTM(10, 20, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        nn.LSTM(10, 0)
    with pytest.raises(ValueError, match="num_layers must be greater than zero"):
        nn.LSTM(10, 20, num_layers=0)
    with pytest.raises(TypeError, match="hidden_size should be of type int, got: float"):
        nn.LSTM(10, 20.0)
    with pytest.raises(ValueError, match="Unrecognized RNN mode: FOO"):
        nn.RNNBase("FOO", 10, 20)


def test_cell_errors():
    c = nn.LSTMCell(10, 20)
    with pytest.raises(RuntimeError, match="input has inconsistent input_size: got 5 "
                                           "expected 10"):
        c(ember.randn(3, 5))
    with pytest.raises(RuntimeError, match="Input batch size 3 doesn't match hidden0 batch "
                                           "size 4"):
        c(ember.randn(3, 10), (ember.randn(4, 20), ember.randn(3, 20)))
    with pytest.raises(RuntimeError, match="hidden0 has inconsistent hidden_size: got 21, "
                                           "expected 20"):
        c(ember.randn(3, 10), (ember.randn(3, 21), ember.randn(3, 20)))
    with pytest.raises(ValueError, match="LSTMCell: Expected input to be 1D or 2D, got 3D "
                                         "instead"):
        c(ember.randn(2, 3, 10))
    with pytest.raises(RuntimeError, match="Unknown nonlinearity: x"):
        nn.RNNCell(10, 20, nonlinearity="x")(ember.randn(3, 10))
    with pytest.raises(ValueError, match="GRUCell: Expected hidden to be 1D or 2D, got 3D"):
        nn.GRUCell(10, 20)(ember.randn(3, 10), ember.randn(1, 3, 20))


@pytest.mark.parametrize("name,kw", [("LSTM", {"proj_size": 1}), ("GRU", {}), ("RNN", {})])
def test_gradcheck_complex_module(name, kw):
    # PyTorch's convention for complex: the fused backward must conjugate the local slopes
    _gradcheck_layer(name, kw, ember.complex128, batch=1, seed=5)


# --- PyTorch's public checks, for subclasses with their own forward ---------------------------

def test_public_checks_of_lstm():
    lstm = nn.LSTM(3, 4, proj_size=2)
    x = ember.zeros(5, 2, 3)
    assert lstm.get_expected_hidden_size(x, None) == (1, 2, 2)
    assert lstm.get_expected_cell_size(x, None) == (1, 2, 4)
    lstm.check_forward_args(x, (ember.zeros(1, 2, 2), ember.zeros(1, 2, 4)), None)
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(1, 2, 4\), got "
                                            r"\[1, 2, 5\]"):
        lstm.check_forward_args(x, (ember.zeros(1, 2, 2), ember.zeros(1, 2, 5)), None)
    with pytest.raises(RuntimeError, match="input must have 3 dimensions, got 2"):
        lstm.check_input(ember.zeros(5, 3), None)
    with pytest.raises(RuntimeError, match="input.size.-1. must be equal to input_size"):
        lstm.check_input(ember.zeros(5, 2, 4), None)
    h = ember.arange(3.0).reshape(1, 3, 1)
    h2, c2 = lstm.permute_hidden((h, h * 2), ember.tensor([1, 2, 0]))
    assert h2.flatten().tolist() == [1.0, 2.0, 0.0] and c2.flatten().tolist() == [2.0, 4.0, 0.0]


def test_public_checks_of_gru():
    gru = nn.GRU(3, 4, batch_first=True, bidirectional=True, num_layers=2)
    assert gru.get_expected_hidden_size(ember.zeros(2, 5, 3), None) == (4, 2, 4)
    assert gru.get_expected_hidden_size(ember.zeros(5, 3), ember.tensor([3, 2])) == (4, 3, 4)
    gru.check_forward_args(ember.zeros(2, 5, 3), ember.zeros(4, 2, 4), None)
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(4, 2, 4\), got \[2, 2, 4\]"):
        gru.check_forward_args(ember.zeros(2, 5, 3), ember.zeros(2, 2, 4), None)
    with pytest.raises(RuntimeError, match=r"bad \(2, 2, 4\) vs \[2, 2, 5\]"):
        gru.check_hidden_size(ember.zeros(2, 2, 5), (2, 2, 4), "bad {} vs {}")
    h = ember.arange(6.0).reshape(1, 3, 2)
    assert gru.permute_hidden(h, None) is h
    assert gru.permute_hidden(h, ember.tensor([2, 0, 1]))[0, :, 0].tolist() == [4.0, 0.0, 2.0]


@pytest.mark.parametrize("kwargs,error,message", [
    ({"bias": 0}, TypeError, "^bias should be of type bool, got: int$"),
    ({"batch_first": 1}, TypeError, "^batch_first should be of type bool, got: int$"),
    ({"input_size": 4.0}, TypeError, "^input_size should be of type int, got: float$"),
    ({"input_size": 0}, ValueError, "^input_size must be greater than zero$"),
])
@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_rnn_constructor_checks_argument_types(cls, kwargs, error, message):
    args = {"input_size": 4, "hidden_size": 5, **kwargs}
    with pytest.raises(error, match=message):
        getattr(nn, cls)(**args)
