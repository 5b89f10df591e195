"""CPU fast paths of round 21: the recurrent layers' per-step weight, its rows kept off a
power of two of at least 2 KiB long (backend/gemm_layout.py, used by ops/_rnn_kernels.py's
_step_weight), against straightforward NumPy and the recurrence composed of ember ops."""

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.ops import _rnn_kernels as K
from ember.ops.recurrent import recurrence, rnn_layer

BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("dtype, rows", [(np.float32, 512), (np.float64, 256), (BF16, 1024),
                                         (np.float32, 1024)])
def test_step_weight_rows_of_a_power_of_two_bytes_are_padded(dtype, rows):
    w = np.arange(rows * 8, dtype=np.float64).reshape(rows, 8).astype(dtype)
    wt = K._step_weight(np, w, [(0, 2), (2, 2)])
    np.testing.assert_array_equal(wt, w.T)
    assert wt.strides == ((rows + 64 // w.itemsize) * w.itemsize, w.itemsize)
    assert not np.shares_memory(wt, w)


@pytest.mark.parametrize("rows", [384, 100, 1536])   # 1.5, 0.4 and 6 KiB
def test_step_weight_other_rows_stay_contiguous(rows):
    w = np.arange(rows * 8, dtype=np.float32).reshape(rows, 8)
    wt = K._step_weight(np, w, [(0, 2), (2, 2)])
    assert wt.flags.c_contiguous
    np.testing.assert_array_equal(wt, w.T)


def _numpy_lstm(x, h, c, w_hh, b_hh):
    """LSTM steps on (T, B, 4H) input projections, written out plainly in float64."""
    hidden = c.shape[1]
    outs = []
    for xt in x:
        gates = xt + h @ w_hh.T + b_hh
        i, f, g, o = (gates[:, k * hidden:(k + 1) * hidden] for k in range(4))
        i, f, o = (1 / (1 + np.exp(-v)) for v in (i, f, o))
        c = f * c + i * np.tanh(g)
        h = o * np.tanh(c)
        outs.append(h)
    return np.stack(outs), h, c


def _lstm_arrays(dtype, hidden=128, batch=5, steps=4, seed=0):
    rng = np.random.default_rng(seed)
    # the projections a non-contiguous view (every other column of a wider array)
    wide = rng.standard_normal((steps * batch, 8 * hidden))
    arrays = {"x": wide[:, ::2], "hx": rng.standard_normal((batch, hidden)),
              "cx": rng.standard_normal((batch, hidden)),
              "w_hh": rng.standard_normal((4 * hidden, hidden)) * 0.1,
              "b_hh": rng.standard_normal(4 * hidden) * 0.1}
    return {k: v.astype(dtype) for k, v in arrays.items()}, [(s * batch, batch)
                                                             for s in range(steps)]


@pytest.mark.parametrize("dtype, tol", [(np.float32, 2e-5), (np.float64, 1e-12)])
def test_lstm_forward_with_padded_weight_matches_numpy(dtype, tol):
    a, steps = _lstm_arrays(dtype)     # 4 * 128 rows: 2 KiB in float32, 4 KiB in float64
    out, h, c, _ = K.lstm_forward(np, a["x"], a["hx"], a["cx"], a["w_hh"], a["b_hh"], None,
                                  steps)
    f64 = {k: v.astype(np.float64) for k, v in a.items()}
    ref_out, ref_h, ref_c = _numpy_lstm(f64["x"].reshape(len(steps), 5, -1), f64["hx"],
                                        f64["cx"], f64["w_hh"], f64["b_hh"])
    assert out.dtype == dtype
    np.testing.assert_allclose(out, ref_out.reshape(out.shape), rtol=tol, atol=tol)
    np.testing.assert_allclose(h, ref_h, rtol=tol, atol=tol)
    np.testing.assert_allclose(c, ref_c, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_padded_weight_gives_the_contiguous_weights_results(dtype, monkeypatch):
    a, steps = _lstm_arrays(dtype, hidden=256)      # 1024 rows: 4 KiB (float32), 2 KiB (bf16)
    args = (a["x"], a["hx"], a["cx"], a["w_hh"], a["b_hh"], None, steps)
    fast = K.lstm_forward(np, *args)
    monkeypatch.setattr(K, "_step_weight", lambda xp, w, s: np.ascontiguousarray(w.T))
    plain = K.lstm_forward(np, *args)
    for got, want in zip(fast, plain):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def _tensors(a, dtype=ember.float64):
    return [ember.tensor(np.ascontiguousarray(a[k]), dtype=dtype, requires_grad=True)
            for k in ("x", "hx", "w_hh", "cx", "b_hh")]


def test_lstm_gradients_through_the_fast_path_match_the_composed_recurrence():
    a, steps = _lstm_arrays(np.float64)
    sizes = tuple(bs for _, bs in steps)
    fast_in, ref_in = _tensors(a), _tensors(a)
    x, hx, w, cx, b = fast_in
    out, h, c = rnn_layer(x, hx, w, cx, b, mode="LSTM", batch_sizes=sizes)
    seeds = [ember.tensor(np.random.default_rng(1).standard_normal(t.shape)) for t in (out, h, c)]
    fast = ember.autograd.grad([out, h, c], fast_in, seeds)
    x, hx, w, cx, b = ref_in
    ref_out = recurrence(x, hx, w, cx, b, mode="LSTM", batch_sizes=sizes, reverse=False)
    ref = ember.autograd.grad(list(ref_out), ref_in, seeds)
    np.testing.assert_allclose(out.detach().numpy(), ref_out[0].detach().numpy(), rtol=1e-12,
                               atol=1e-12)
    for got, want in zip(fast, ref):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


def test_lstm_double_backward_through_the_fast_path():
    a, steps = _lstm_arrays(np.float64, hidden=128, batch=2, steps=3)
    sizes = tuple(bs for _, bs in steps)
    results = []
    for run in ("fast", "composed"):
        x, hx, w, cx, b = _tensors(a)
        if run == "fast":
            out = rnn_layer(x, hx, w, cx, b, mode="LSTM", batch_sizes=sizes)[0]
        else:
            out = recurrence(x, hx, w, cx, b, mode="LSTM", batch_sizes=sizes, reverse=False)[0]
        (gw,) = ember.autograd.grad(out.pow(2).sum(), [w], create_graph=True)
        (ggx,) = ember.autograd.grad(gw.pow(2).sum(), [x])
        results.append(ggx.numpy())
    assert np.abs(results[0]).max() > 0
    np.testing.assert_allclose(results[0], results[1], rtol=1e-10, atol=1e-12)


def test_lstm_module_float32_matches_numpy():
    ember.manual_seed(0)
    lstm = ember.nn.LSTM(32, 128, num_layers=1)     # 4 * 128 float32 rows: 2 KiB
    x = np.random.default_rng(2).standard_normal((6, 3, 32)).astype(np.float32)
    out, (h, c) = lstm(ember.tensor(x))
    p = {k: v.detach().numpy().astype(np.float64) for k, v in lstm.named_parameters()}
    proj = x.astype(np.float64) @ p["weight_ih_l0"].T + p["bias_ih_l0"]
    zeros = np.zeros((3, 128))
    ref, ref_h, ref_c = _numpy_lstm(proj, zeros, zeros, p["weight_hh_l0"], p["bias_hh_l0"])
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(h.detach().numpy()[0], ref_h, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c.detach().numpy()[0], ref_c, rtol=1e-4, atol=1e-5)
