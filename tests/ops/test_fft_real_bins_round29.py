"""The N-D transforms of a real signal give exactly real self-conjugate bins (every
transformed index 0 or n/2), as PyTorch's kernels do; the rest of the spectrum is NumPy's."""

import itertools

import numpy as np
import pytest

import ember

CASES = [((6, 8), (0, 1)), ((10, 12), (0, 1)), ((4, 6, 8), (0, 1, 2)), ((12, 7, 4), (0, 1))]


@pytest.mark.parametrize("shape, dims", CASES)
@pytest.mark.parametrize("name, reference", [
    ("rfftn", lambda x, dims: np.fft.rfftn(x, axes=dims)),
    ("fftn", lambda x, dims: np.fft.fftn(x, axes=dims)),
    ("ifftn", lambda x, dims: np.fft.ifftn(x, axes=dims)),
    ("ihfftn", lambda x, dims: np.conj(np.fft.rfftn(x, axes=dims)) / np.prod(
        [x.shape[d] for d in dims])),
])
def test_self_conjugate_bins_are_exactly_real(shape, dims, name, reference):
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    out = getattr(ember.fft, name)(ember.from_numpy(x), dim=dims).numpy()
    np.testing.assert_allclose(out, reference(x.astype(np.float64), dims), rtol=1e-4,
                               atol=1e-5)
    picks = [(0, shape[d] // 2) if shape[d] % 2 == 0 else (0,) for d in dims]
    for bins in itertools.product(*picks):
        index = [slice(None)] * len(shape)
        for d, k in zip(dims, bins):
            index[d] = k
        assert (out[tuple(index)].imag == 0).all(), bins


def test_gradient_of_a_per_mode_weight_is_zero_at_the_nyquist_row():
    # the imaginary part of a weight on a self-conjugate bin never reaches irfft2's output
    rng = np.random.default_rng(0)
    x = ember.from_numpy(rng.standard_normal((2, 6, 8, 4)).astype(np.float32))
    weight = ember.from_numpy(rng.standard_normal((6, 5, 4, 2)).astype(np.float32))
    weight.requires_grad_()
    spec = ember.fft.rfft2(x, dim=(1, 2), norm="ortho")
    y = ember.fft.irfft2(spec * ember.view_as_complex(weight), s=(6, 8), dim=(1, 2),
                         norm="ortho")
    y.pow(2).sum().backward()
    grad = weight.grad.numpy()
    for kh, kw in itertools.product((0, 3), (0, 4)):
        assert (grad[kh, kw, :, 1] == 0).all(), (kh, kw)
    assert np.abs(grad[1:3, 1:3]).min() > 0
