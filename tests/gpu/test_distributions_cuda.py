"""Every example distribution with its parameters on a GPU: samples are drawn there, and
log_prob, entropy and the gradients of rsample equal the CPU's for the same values."""

import pytest

import ember
from ember.testing import assert_close
from tests.distributions.examples import CASE_IDS, CASES

pytestmark = pytest.mark.cuda


def _on(device, params):
    """The parameters moved to ``device`` as new leaves; None when one is not a tensor or
    number (nested distributions are moved by the families' own tests)."""
    moved = {}
    for name, value in params.items():
        if isinstance(value, ember.Tensor):
            moved[name] = value.detach().to(device).requires_grad_(value.requires_grad)
        elif isinstance(value, (int, float, bool)) or value is None:
            moved[name] = value
        else:
            return None
    return moved


@pytest.mark.parametrize("cls,params", CASES, ids=CASE_IDS)
def test_distribution_on_cuda_matches_cpu(cls, params):
    on_gpu, on_cpu = _on("cuda", params), _on("cpu", params)
    if on_gpu is None:
        pytest.skip("a nested distribution or transform as a parameter")
    if not any(isinstance(v, ember.Tensor) for v in on_gpu.values()):
        pytest.skip("numbers only: the distribution lives on the default device")
    gpu, cpu = cls(**on_gpu), cls(**on_cpu)
    ember.manual_seed(0)
    values = gpu.sample((3,))
    assert values.device.type == "cuda"
    assert_close(gpu.log_prob(values).cpu(), cpu.log_prob(values.cpu()), rtol=1e-6, atol=1e-8)
    try:
        entropy = cpu.entropy()
    except NotImplementedError:
        entropy = None
    if entropy is not None:
        assert_close(gpu.entropy().cpu(), entropy, rtol=1e-6, atol=1e-8)
    if gpu.has_rsample:
        leaves = [v for v in on_gpu.values() if isinstance(v, ember.Tensor) and v.requires_grad]
        if leaves:
            grads = ember.autograd.grad(gpu.rsample((2,)).sum(), leaves, allow_unused=True)
            assert all(g is None or g.device.type == "cuda" for g in grads)
