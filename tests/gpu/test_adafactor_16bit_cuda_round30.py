"""Adafactor on 16-bit CUDA parameters: ``foreach=None`` runs PyTorch's single-tensor loop on
every device (its ``adafactor`` takes the multi-tensor path only for ``foreach=True``), so
the step ends in one fused ``add_(update, alpha=...)``, as ``foreach=False`` does."""

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.cuda


def _step(foreach, dtype):
    rng = np.random.default_rng(7)
    params = []
    for shape in [(67,), (9, 21)]:
        p = ember.nn.Parameter(ember.tensor(rng.standard_normal(shape) * 3).to(dtype).cuda())
        p.grad = ember.tensor(rng.standard_normal(shape) * 5).to(dtype).cuda()
        params.append(p)
    opt = ember.optim.Adafactor(params, lr=0.05, weight_decay=0.1, foreach=foreach)
    for _ in range(3):
        opt.step()
    return [p.detach().cpu().float().numpy() for p in params]


@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float16])
def test_adafactor_default_is_the_single_tensor_step(dtype):
    for got, want in zip(_step(None, dtype), _step(False, dtype)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("make", [
    lambda ps: ember.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    lambda ps: ember.optim.Adam(ps, lr=0.01, weight_decay=0.1, amsgrad=True),
    lambda ps: ember.optim.Adafactor(ps, lr=0.05, foreach=False),
], ids=["SGD", "Adam", "Adafactor"])
def test_16bit_steps_run_on_cuda(make):
    # the scaled adds of the 16-bit steps take CuPy arrays (the scale in float32, not a
    # host array); the GPU's roundings differ from the CPU's scalar tail by an ulp at most
    def run(device):
        p = ember.nn.Parameter(ember.linspace(-3, 3, 67).bfloat16().to(device))
        opt = make([p])
        for i in range(3):
            p.grad = (ember.arange(67.0) * (i + 1)).sin().bfloat16().to(device)
            opt.step()
        return p.detach().cpu().float().numpy()
    np.testing.assert_allclose(run("cuda"), run("cpu"), rtol=2 ** -7, atol=2 ** -9)
