"""Fixes found by round 34's implicit-layer programs (tests/parity/
test_parity_programs_round34_implicit*.py)."""

import numpy as np
import pytest

import ember as torch


@pytest.mark.parametrize("kind", ["hook", "parametrization"])
def test_spectral_norm_power_iteration_runs_inside_jvp(kind):
    # Jacobian-free DEQs estimate a spectrally normalised cell's Jacobian by power iteration
    # on func.jvp; the training-mode forward writes u and v with out= as PyTorch's, which a
    # transform allows (an in-place copy_ into the captured buffers was refused)
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 3, bias=False)
    if kind == "hook":
        lin = torch.nn.utils.spectral_norm(lin)
        u = lin.weight_u
    else:
        lin = torch.nn.utils.parametrizations.spectral_norm(lin)
        u = lin.parametrizations.weight[0]._u
    before = u.clone()
    z = torch.tensor([1.0, -2.0, 0.5])
    t = torch.tensor([0.3, 0.1, -1.0])
    out, tangent = torch.func.jvp(lin, (z,), (t,))
    assert not torch.equal(u, before)       # the power iteration stepped
    lin.eval()      # the weight from the stepped u and v, without another step
    with torch.no_grad():
        w = lin.weight.clone()
    np.testing.assert_allclose(tangent.tolist(), (w @ t).tolist(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.tolist(), (w @ z).tolist(), rtol=1e-5, atol=1e-6)


def test_spectral_norm_in_place_write_into_captured_buffer_still_refused():
    # the transform still refuses a genuine in-place write into a captured tensor
    buf = torch.zeros(3)

    def f(z):
        with torch.no_grad():
            buf.copy_(z.detach())
        return z * 2
    with pytest.raises(RuntimeError, match="mutate a captured Tensor"):
        torch.func.jvp(f, (torch.ones(3),), (torch.ones(3),))
