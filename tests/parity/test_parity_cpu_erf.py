"""erf of tensors large enough for ember's float32 CPU kernel (backend/cpu_math.py) against
PyTorch's CPU erf: values, edges, 16-bit dtypes, gradients and Normal.cdf."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

EDGES = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-40, -1e-45, 3.9, 1.0, -1.0]


def _values(n=10_000):
    x = (np.random.default_rng(3).standard_normal(n) * 2).astype(np.float32)
    x[:len(EDGES)] = EDGES
    return x


def _ulps(a, b):
    a, b = (v.view(np.int32).astype(np.int64) for v in (a, b))
    a, b = (np.where(v < 0, -(v & 0x7FFFFFFF), v) for v in (a, b))
    return np.abs(a - b)


def test_float32_erf_within_two_ulp_of_torch_and_same_edges():
    x = _values()
    ours = ember.erf(ember.tensor(x)).numpy()
    theirs = torch.erf(torch.tensor(x)).numpy()
    assert ours.dtype == np.float32
    assert np.array_equal(np.isnan(ours), np.isnan(theirs))
    assert np.array_equal(np.signbit(ours), np.signbit(theirs))
    finite = ~np.isnan(theirs)
    assert _ulps(ours[finite], theirs[finite]).max() <= 2


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_erf_matches_torch(dtype):
    x = _values()
    ours = ember.erf(ember.tensor(x).to(getattr(ember, dtype)))
    theirs = torch.erf(torch.tensor(x).to(getattr(torch, dtype)))
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    ours, theirs = ours.float().numpy(), theirs.float().numpy()
    finite = ~np.isnan(theirs) & (np.abs(theirs) > 1e-30)     # torch's bfloat16 flushes tiny
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=2 ** -8, atol=0)


def test_float32_erf_gradient_and_normal_cdf_match_torch():
    x = _values()[len(EDGES):]
    ours, theirs = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ember.erf(ours).sum().backward()
    torch.erf(theirs).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-6, atol=1e-7)
    cdf = ember.distributions.Normal(0.5, 2.0).cdf(ember.tensor(x)).numpy()
    expected = torch.distributions.Normal(0.5, 2.0).cdf(torch.tensor(x)).numpy()
    np.testing.assert_allclose(cdf, expected, rtol=0, atol=2e-7)
