"""Deterministic mode on a GPU: the ops that add repeats with atomics take the ordered path
(``backend.ordered_sums``) and agree with the CPU, and reruns agree to the bit."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.testing import assert_close

pytestmark = pytest.mark.cuda


@pytest.fixture
def deterministic():
    ember.use_deterministic_algorithms(True)
    yield
    ember.use_deterministic_algorithms(False)


def _repeats(device, n=300, rows=7, seed=0):
    g = np.random.default_rng(seed)
    index = ember.tensor(g.integers(0, rows, n), device=device)
    values = ember.tensor(g.standard_normal((n, 5)) * 10 ** g.uniform(-3, 3, (n, 1)),
                          dtype=ember.float32, device=device)
    return index, values


def _accumulations(device):
    """Each op that sums repeated indices, on ``device``."""
    index, values = _repeats(device)
    flat = values[:, 0].contiguous()
    table = ember.zeros(7, 5, device=device)
    weight = ember.randn(7, 5, generator=ember.Generator().manual_seed(1)).to(device)
    weight.requires_grad_(True)
    F.embedding(index, weight).mul(values).sum().backward()
    image = ember.linspace(-1, 1, 2 * 3 * 9 * 9).reshape(2, 3, 9, 9).to(device)
    image.requires_grad_(True)
    F.max_pool2d(image, 3, stride=1).square().sum().backward()     # overlapping windows
    return {
        "index_add": table.index_add(0, index, values),
        "index_put": table.index_put((index,), values, accumulate=True),
        "index_put pairs": table.index_put((index, index % 5), flat, accumulate=True),
        "put_": ember.zeros(35, device=device).put_(index * 5, flat, accumulate=True),
        "scatter_add": table.scatter_add(0, index[:, None].expand(-1, 5), values),
        "scatter_reduce mean": table.scatter_reduce(0, index[:, None].expand(-1, 5), values,
                                                    "mean"),
        "bincount": ember.bincount(index, weights=flat),
        "histc weights": ember.histogram(flat, bins=4, weight=flat.abs()).hist,
        "embedding grad": weight.grad,
        "max_pool2d grad": image.grad,
        "16-bit index_add": table.half().index_add(0, index, values.half()),
    }


def test_accumulations_match_the_cpu_and_rerun_to_the_bit(deterministic):
    want = _accumulations("cpu")
    first, second = _accumulations("cuda"), _accumulations("cuda")
    for name, got in first.items():
        assert_close(got.cpu(), want[name], rtol=1e-3 if "16" in name else 1e-5, atol=1e-3,
                     msg=name)
        assert np.array_equal(got.cpu().numpy(), second[name].cpu().numpy()), name


def test_interpolation_gradient_skips_the_atomic_kernel(deterministic, monkeypatch):
    from ember.backend.cuda_kernels import DERIVATIVES
    ember.ones(1).cuda()                            # loads the backend and its kernels
    if "nn.functional.interpolate" in DERIVATIVES:  # (without Triton: the generic code only)
        from ember.backend.cuda_kernels import triton_resample

        def refuse(*args):
            raise AssertionError("the atomic-add kernel ran in deterministic mode")
        monkeypatch.setattr(triton_resample, "resample2d_backward", refuse)
    grads = []
    for device in ("cpu", "cuda"):
        x = ember.linspace(-1, 1, 2 * 3 * 5 * 6).reshape(2, 3, 5, 6).to(device)
        x.requires_grad_(True)
        F.interpolate(x, scale_factor=2.5, mode="bilinear").cos().sum().backward()
        grads.append(x.grad.cpu())
    assert_close(grads[1], grads[0])


def test_scatter_products_run_without_cupy_multiply_at():
    # CuPy's ufuncs have no multiply.at: products take the ordered path in any mode
    index, values = _repeats("cpu", n=40, rows=4)
    values = values.sign() * (1 + values.abs().clamp(max=1) / 4)
    ones = ember.ones(4, 5)
    want = ones.scatter_reduce(0, index[:, None].expand(-1, 5), values, "prod")
    got = ones.cuda().scatter_reduce(0, index.cuda()[:, None].expand(-1, 5), values.cuda(),
                                     "prod")
    assert_close(got.cpu(), want)
