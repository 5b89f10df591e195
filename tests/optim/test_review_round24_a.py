"""Review round 24 (a): LBFGS keeps float64 step lengths and H_diag as 0-dim tensors (NumPy's
float64 scalars are Python floats too), so its state_dict loads with weights_only."""

import io

import numpy as np
import pytest

import ember


def _lbfgs(dtype, start, steps):
    x = ember.nn.Parameter(ember.tensor(start, dtype=dtype))
    opt = ember.optim.LBFGS([x], lr=1, max_iter=1)

    def closure():
        opt.zero_grad()
        loss = ((x - 0.5).abs() ** 4).sum() + (x.abs() ** 2).sum()
        loss.backward()
        return loss
    for _ in range(steps):
        opt.step(closure)
    return x, opt


@pytest.mark.parametrize("dtype", [ember.float64, ember.complex128, ember.float32])
def test_h_diag_is_a_zero_dim_tensor(dtype):
    x, opt = _lbfgs(dtype, [3.0, -2.0, 0.5], 3)
    h_diag = opt.state[x]["H_diag"]
    assert isinstance(h_diag, ember.Tensor) and h_diag.ndim == 0
    assert h_diag.dtype == (ember.float32 if dtype == ember.float32 else ember.float64)
    y = opt.state[x]["old_dirs"][-1].numpy()
    s = opt.state[x]["old_stps"][-1].numpy()
    np.testing.assert_allclose(h_diag.item(), (y @ s) / (y @ y), rtol=1e-6)


def test_first_step_length_is_a_zero_dim_tensor():
    # t = min(1, 1 / |g|_1) * lr: below 1 here, a float64 0-dim tensor as PyTorch's
    x, opt = _lbfgs(ember.float64, [3.0, -2.0, 0.5], 1)
    t = opt.state[x]["t"]
    assert isinstance(t, ember.Tensor) and t.dtype == ember.float64
    g = 4 * (np.array([3.0, -2.0, 0.5]) - 0.5) ** 3 + 2 * np.array([3.0, -2.0, 0.5])
    assert t.item() == 1.0 / np.abs(g).sum()


def test_float64_state_dict_round_trips_with_weights_only():
    x, opt = _lbfgs(ember.float64, [3.0, -2.0, 0.5], 3)
    buf = io.BytesIO()
    ember.save(opt.state_dict(), buf)
    buf.seek(0)
    loaded = ember.load(buf, weights_only=True)
    assert isinstance(loaded["state"][0]["H_diag"], ember.Tensor)
    assert loaded["state"][0]["H_diag"].item() == opt.state[x]["H_diag"].item()
