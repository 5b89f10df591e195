"""The recurrent layers' CPU time loops: each backward is the gradient of its forward."""

import numpy as np
import pytest

from ember.ops import _rnn_kernels as K

# packed rows of three sequences of lengths 3, 2 and 1: steps of 3, 2 and 1 rows
STEPS = [(0, 3), (3, 2), (5, 1)]
ROWS, BATCH, HIDDEN = 6, 3, 4


def _lstm_inputs(proj, rng):
    state = proj or HIDDEN
    arrays = {"x": (ROWS, 4 * HIDDEN), "hx": (BATCH, state), "cx": (BATCH, HIDDEN),
              "w_hh": (4 * HIDDEN, state), "b_hh": (4 * HIDDEN,)}
    if proj:
        arrays["w_hr"] = (proj, HIDDEN)
    inputs = {k: rng.standard_normal(s) for k, s in arrays.items()}
    inputs.setdefault("w_hr", None)
    return inputs


def _lstm_loss(inputs, seeds):
    out, h, c, _ = K.lstm_forward(np, inputs["x"], inputs["hx"], inputs["cx"], inputs["w_hh"],
                                  inputs["b_hh"], inputs["w_hr"], STEPS)
    return sum(np.vdot(a, s) for a, s in zip((out, h, c), seeds))


@pytest.mark.parametrize("proj", [0, 3])
def test_lstm_backward_is_the_gradient_of_packed_steps(proj):
    rng = np.random.default_rng(0)
    inputs = _lstm_inputs(proj, rng)
    out, h, c, ws = K.lstm_forward(np, inputs["x"], inputs["hx"], inputs["cx"],
                                   inputs["w_hh"], inputs["b_hh"], inputs["w_hr"], STEPS)
    seeds = [rng.standard_normal(a.shape) for a in (out, h, c)]
    dx, dhx, dw_hh, dcx, db, dw_hr = K.lstm_backward(np, seeds[0], seeds[1], seeds[2], ws,
                                                     inputs["w_hh"], inputs["b_hh"],
                                                     inputs["w_hr"], STEPS)
    grads = {"x": dx, "hx": dhx, "w_hh": dw_hh, "cx": dcx, "b_hh": db, "w_hr": dw_hr}
    for name, grad in grads.items():
        if inputs[name] is None:
            assert grad is None
            continue
        value = inputs[name]
        numeric = np.zeros_like(value)
        for index in np.ndindex(value.shape):
            keep = value[index]
            value[index] = keep + 1e-6
            up = _lstm_loss(inputs, seeds)
            value[index] = keep - 1e-6
            numeric[index] = (up - _lstm_loss(inputs, seeds)) / 2e-6
            value[index] = keep
        np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-7, err_msg=name)


def test_step_weight_is_row_major_when_several_steps_share_it():
    # OpenBLAS multiplies by a row-major matrix faster than by a transposed view
    w = np.arange(12.0).reshape(4, 3)
    several = K._step_weight(np, w, STEPS)
    assert several.flags.c_contiguous
    np.testing.assert_array_equal(several, w.T)
    assert np.shares_memory(K._step_weight(np, w, STEPS[:1]), w)      # one step: no copy
