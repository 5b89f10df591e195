"""Piecewise-linear activations bit for bit against PyTorch (round 31: their faster kernels),
and vmap over recurrent cells and layers: which ones PyTorch's fallback loops over (warning
with the cell's ATen name) and which it refuses."""

import warnings

import numpy as np
import pytest

import ember
from tests.parity._compare import first_line

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

# the boundaries of every op below, signed zeros, infinities, tiny and huge values
_EDGES = [-0.0, 0.0, 6.0, -6.0, -1.0, 1.0, float("inf"), float("-inf"), 7.0, -3.0, 3.0,
          5.9, 1e-45, -1e-45, 2.9999, -2.9999, 3e38, -3e38, 0.5, -0.5]
_NAN = float("nan")
_GRADS = [1.0, -1.0, float("inf"), float("-inf"), _NAN, -0.0, 0.0, 2.5, -7.25]

# (name, fn(F, x), whether the backward of a NaN input is compared: PyTorch's hardtanh and
# hardswish backwards keep a NaN input's gradient in their scalar loop and drop it in their
# vectorized one, so its value depends on where the element falls)
_OPS = [
    ("relu", lambda F, x: F.relu(x), True),
    ("relu_", lambda F, x: F.relu(x.clone(), inplace=True), True),
    ("relu6", lambda F, x: F.relu6(x), False),
    ("relu6_", lambda F, x: F.relu6(x.clone(), inplace=True), False),
    ("hardtanh", lambda F, x: F.hardtanh(x), False),
    ("hardtanh_0_6", lambda F, x: F.hardtanh(x, 0.0, 6.0), False),
    ("hardtanh_-0_6", lambda F, x: F.hardtanh(x, -0.0, 6.0), False),
    ("hardtanh_0_0", lambda F, x: F.hardtanh(x, 0.0, 0.0), False),
    ("hardtanh_-2.5_0.5", lambda F, x: F.hardtanh(x, -2.5, 0.5), False),
    ("leaky_relu", lambda F, x: F.leaky_relu(x), True),
    ("leaky_relu_1", lambda F, x: F.leaky_relu(x, 1.0), True),
    ("leaky_relu_0", lambda F, x: F.leaky_relu(x, 0.0), True),
    ("leaky_relu_2.5", lambda F, x: F.leaky_relu(x, 2.5), True),
    ("leaky_relu_-0.3", lambda F, x: F.leaky_relu(x, -0.3), True),
    ("leaky_relu_1e-30", lambda F, x: F.leaky_relu(x, 1e-30), True),
    ("leaky_relu_", lambda F, x: F.leaky_relu(x.clone(), 0.2, inplace=True), True),
    ("hardswish", lambda F, x: F.hardswish(x), False),
    ("hardswish_", lambda F, x: F.hardswish(x.clone(), inplace=True), False),
    ("hardsigmoid", lambda F, x: F.hardsigmoid(x), True),
]


def _samples(count, nan):
    rng = np.random.default_rng(count)
    edges = _EDGES + ([_NAN] if nan else [])
    x = np.resize(np.array(edges), count)
    x[len(edges) * 3:] = rng.standard_normal(max(count - len(edges) * 3, 0)) * 5
    g = np.roll(np.resize(np.array(_GRADS), count), 1)
    return x, g


def _run(lib, fn, dtype, x, g, layout):
    dt = getattr(lib, dtype)
    xs = lib.tensor(x.tolist(), dtype=lib.float64).to(dt)
    gs = lib.tensor(g.tolist(), dtype=lib.float64).to(dt)
    if layout == "0d":
        xs, gs = xs[0], gs[0]
    elif layout == "transposed":
        xs, gs = xs.reshape(5, -1).t(), gs.reshape(5, -1).t()
    xs.requires_grad_(True)
    out = fn(lib.nn.functional, xs)
    out.backward(gs)
    return out.detach().double().numpy(), xs.grad.double().numpy(), str(out.dtype)


def _bits(a):
    return np.ascontiguousarray(a).view(np.int64)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("count,layout", [(410, "flat"), (410, "transposed"), (7, "flat"),
                                          (1, "0d"), (0, "flat")])
@pytest.mark.parametrize("name,fn,nan_grads", _OPS, ids=[o[0] for o in _OPS])
def test_activation_values_and_gradients_bitwise(name, fn, nan_grads, dtype, count, layout):
    for nan in (False, True):
        x, g = _samples(count, nan)
        theirs = _run(torch, fn, dtype, x, g, layout)
        ours = _run(ember, fn, dtype, x, g, layout)
        assert ours[2].split(".")[1] == theirs[2].split(".")[1]
        # (NaN inputs: the output's NaNs must sit where PyTorch's do, payloads aside)
        for k, what in enumerate(("forward", "backward")):
            a, b = ours[k], theirs[k]
            assert a.shape == b.shape, what
            if nan and what == "backward" and not nan_grads:
                keep = ~np.isnan(np.asarray(_run_inputs(x, layout)))
                a, b = a[keep], b[keep]
            assert np.array_equal(np.isnan(a), np.isnan(b)), (what, nan)
            a, b = np.where(np.isnan(a), 0, a), np.where(np.isnan(b), 0, b)
            assert np.array_equal(_bits(a), _bits(b)), (what, nan, x[_bits(a) != _bits(b)]
                                                        if layout == "flat" else None)


def _run_inputs(x, layout):
    if layout == "0d":
        return x[0]
    return x.reshape(5, -1).T if layout == "transposed" else x


# --- vmap over recurrent cells and layers -----------------------------------------------------

B, N, IN, H, T = 3, 2, 4, 5, 6


def _cell(lib, kind, **kw):
    """The module, its parameters drawn by NumPy (the same in both libraries)."""
    m = getattr(lib.nn, kind)(IN, H, **kw)
    rng = np.random.default_rng(0)
    with lib.no_grad():
        for p in m.parameters():
            p.copy_(lib.tensor(rng.uniform(-0.5, 0.5, tuple(p.shape)), dtype=p.dtype))
    return m


_RECURRENT = {
    "RNNCell": (lambda lib: _cell(lib, "RNNCell"), lambda m, x, h: m(x, h)),
    "RNNCell_relu": (lambda lib: _cell(lib, "RNNCell", nonlinearity="relu"),
                     lambda m, x, h: m(x, h)),
    "RNNCell_no_bias_no_hx": (lambda lib: _cell(lib, "RNNCell", bias=False),
                              lambda m, x, h: m(x)),
    "GRUCell": (lambda lib: _cell(lib, "GRUCell"), lambda m, x, h: m(x, h)),
    "GRUCell_unbatched": (lambda lib: _cell(lib, "GRUCell"), lambda m, x, h: m(x[0], h[0])),
    "LSTMCell": (lambda lib: _cell(lib, "LSTMCell"), lambda m, x, h: m(x, (h, h))[0]),
    "LSTMCell_no_hx": (lambda lib: _cell(lib, "LSTMCell"), lambda m, x, h: m(x)[1]),
    "RNN": (lambda lib: _cell(lib, "RNN"), lambda m, x, h: m(x.expand(T, N, IN))[0]),
    "RNN_relu_hx": (lambda lib: _cell(lib, "RNN", nonlinearity="relu"),
                    lambda m, x, h: m(x.expand(T, N, IN), h[None])[1]),
    "GRU_2_layers": (lambda lib: _cell(lib, "GRU", num_layers=2),
                     lambda m, x, h: m(x.expand(T, N, IN))[0]),
    "LSTM_bidirectional": (lambda lib: _cell(lib, "LSTM", bidirectional=True),
                           lambda m, x, h: m(x.expand(T, N, IN))[0]),
    "LSTM_hx_batch_first": (lambda lib: _cell(lib, "LSTM", batch_first=True),
                            lambda m, x, h: m(x.expand(T, N, IN).transpose(0, 1),
                                              (h[None], h[None]))[0]),
    "LSTM_proj": (lambda lib: _cell(lib, "LSTM", proj_size=3),
                  lambda m, x, h: m(x.expand(T, N, IN))[0]),
}


def _vmapped(lib, name, batched):
    """``(outcome, fallback warnings' ATen names, result)`` of a vmap of ``name`` over its
    input, its state or (through functional_call) its parameters."""
    make, fn = _RECURRENT[name]
    m = make(lib)
    rng = np.random.default_rng(1)
    x = lib.tensor(rng.standard_normal((B, N, IN)), dtype=lib.float32)
    h = lib.tensor(rng.standard_normal((B, N, H)), dtype=lib.float32)
    vmap = lib.func.vmap
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if batched == "input":
                out = vmap(lambda xx: fn(m, xx, h[0]))(x)
            elif batched == "state":
                out = vmap(lambda hh: fn(m, x[0], hh))(h)
            else:
                params = {k: v.detach()[None].expand(B, *v.shape).clone()
                          for k, v in m.named_parameters()}
                out = vmap(lambda p: fn(lambda *a: lib.func.functional_call(m, p, a),
                                        x[0], h[0]))(params)
            result = ("ok", tuple(out.shape))
        except RuntimeError as e:
            out, result = None, ("RuntimeError", first_line(str(e)))
    names = sorted(str(w.message).split("batching rule for ")[1].split(". Please")[0]
                   for w in caught if "performance drop" in str(w.message))
    return result, names, out


@pytest.mark.parametrize("batched", ["input", "state", "parameters"])
@pytest.mark.parametrize("name", sorted(_RECURRENT))
def test_vmap_over_recurrent_modules(name, batched):
    theirs = _vmapped(torch, name, batched)
    ours = _vmapped(ember, name, batched)
    assert ours[:2] == theirs[:2]
    if theirs[2] is not None:
        np.testing.assert_allclose(ours[2].detach().numpy(), theirs[2].detach().numpy(),
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "lstm_cell"])
def test_vmap_over_functional_cells(kind):
    def run(lib):
        rng = np.random.default_rng(0)
        gates = 4 if kind == "lstm_cell" else 3 if kind == "gru_cell" else 1
        x, h, w_ih, w_hh = (lib.tensor(rng.standard_normal(shape), dtype=lib.float32)
                            for shape in ((B, N, IN), (N, H), (gates * H, IN), (gates * H, H)))
        cell = getattr(lib, kind)
        state = (h, h) if kind == "lstm_cell" else h
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = lib.func.vmap(lambda xx: cell(xx, state, w_ih, w_hh))(x)
                res = ("ok", out.detach().numpy().round(4).tolist())
            except RuntimeError as e:
                res = ("RuntimeError", first_line(str(e)))
        # (PyTorch's message ends with where its C++ code warned)
        return res, [str(w.message).split(" (Triggered internally")[0] for w in caught]
    assert run(ember) == run(torch)
