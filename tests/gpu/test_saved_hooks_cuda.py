"""save_on_cpu on a GPU: activations saved for backward wait in (pinned) host memory and
come back to the GPU for backward, giving the gradients of a plain backward."""

import numpy as np
import pytest

import ember
from ember.autograd.graph import save_on_cpu, saved_tensors_hooks

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("pin_memory", [False, True])
def test_save_on_cpu_keeps_activations_on_the_host(pin_memory):
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(16, 32), ember.nn.GELU(),
                                ember.nn.Linear(32, 4)).cuda()
    x = ember.randn(8, 16, device="cuda")
    model(x).square().mean().backward()
    expected = [p.grad.cpu().numpy() for p in model.parameters()]
    model.zero_grad()

    parked = []
    hooks = save_on_cpu(pin_memory=pin_memory)
    pack, unpack = hooks.pack_hook, hooks.unpack_hook

    def spying_pack(t):
        device, host = pack(t)
        parked.append((device.type, host.device.type, host.is_pinned()))
        return device, host

    with saved_tensors_hooks(spying_pack, unpack):
        loss = model(x).square().mean()
    loss.backward()
    assert parked and all(p == ("cuda", "cpu", pin_memory) for p in parked)
    for p, g in zip(model.parameters(), expected):
        assert p.grad.device.type == "cuda"
        np.testing.assert_allclose(p.grad.cpu().numpy(), g, rtol=1e-5, atol=1e-6)
