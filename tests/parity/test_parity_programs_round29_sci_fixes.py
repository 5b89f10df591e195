"""What the scientific-ML programs of round 29 (test_parity_programs_round29_sci.py and its
_dense sibling) found, each pinned against PyTorch: the N-D transforms of a real signal
(rfft2/rfftn, ihfft2/ihfftn, and fft2/fftn/ifft2/ifftn of real input) give exactly real
self-conjugate bins (every index 0 or n/2), as PyTorch's kernels do; pocketfft's complex
passes over the leading dims left ~1e-8 of imaginary noise there, which made the gradient of
an FNO/AFNO per-mode complex weight at the Nyquist row nonzero where PyTorch's is exactly 0,
and Adam turned that noise into full-size steps. ihfft2 of a zero-padded signal keeps
PyTorch's -0.0 imaginary parts in the padded rows' transform too."""

import itertools

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

SHAPES = [((6, 8), (0, 1)), ((10, 12), (0, 1)), ((6, 5), (0, 1)), ((4, 6, 8), (0, 1, 2)),
          ((12, 7, 4), (0, 1)), ((2, 3), (0, 1))]


def _self_conjugate(shape, dims, out_shape):
    """An index picking the bins whose every transformed index is 0 or n/2."""
    picks = [[0] + ([shape[d] // 2] if shape[d] % 2 == 0 else []) for d in dims]
    axes = [picks[dims.index(a)] if a in dims else range(out_shape[a])
            for a in range(len(shape))]
    return np.ix_(*axes)


@pytest.mark.parametrize("name", ["rfftn", "fftn", "ifftn", "ihfftn"])
@pytest.mark.parametrize("shape, dims", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_real_signal_self_conjugate_bins_are_exactly_real(name, shape, dims, dtype):
    x = np.random.default_rng(len(shape) + shape[0]).standard_normal(shape).astype(dtype)
    for norm in (None, "ortho", "forward"):
        ours = getattr(ember.fft, name)(ember.from_numpy(x), dim=dims, norm=norm).numpy()
        theirs = getattr(torch.fft, name)(torch.from_numpy(x), dim=dims, norm=norm).numpy()
        pick = _self_conjugate(shape, dims, theirs.shape)
        np.testing.assert_array_equal(ours[pick].imag, theirs[pick].imag)
        np.testing.assert_array_equal(np.signbit(ours[pick].imag), np.signbit(theirs[pick].imag))
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_per_mode_complex_weight_gradient_is_zero_at_self_conjugate_bins():
    rng = np.random.default_rng(0)
    x, w, g = (rng.standard_normal(s).astype(np.float32)
               for s in [(2, 6, 8, 4), (6, 5, 4, 2), (2, 6, 8, 4)])

    def grad(lib):
        weight = lib.from_numpy(w).requires_grad_()
        spec = lib.fft.rfft2(lib.from_numpy(x), dim=(1, 2), norm="ortho")
        y = lib.fft.irfft2(spec * lib.view_as_complex(weight), s=(6, 8), dim=(1, 2),
                           norm="ortho")
        (y * lib.from_numpy(g)).sum().backward()
        return weight.grad.numpy()

    ours, theirs = grad(ember), grad(torch)
    for kh, kw in itertools.product((0, 3), (0, 4)):
        assert (theirs[kh, kw, :, 1] == 0).all()
        np.testing.assert_array_equal(ours[kh, kw, :, 1], theirs[kh, kw, :, 1])
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_padded_ihfft2_keeps_pytorchs_signs_of_zero():
    x = np.random.default_rng(1).standard_normal((5, 7)).astype(np.float32)
    ours = ember.fft.ihfft2(ember.from_numpy(x), s=(6, 10)).numpy()
    theirs = torch.fft.ihfft2(torch.from_numpy(x), s=(6, 10)).numpy()
    np.testing.assert_array_equal(np.signbit(ours[[0, 3], 0].imag),
                                  np.signbit(theirs[[0, 3], 0].imag))
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def _inplace_on_leaf_views(lib):
    """The error (or None) of in-place writes through views of leaves made by requires_grad_()
    on a view of a tensor that needs no grad (a weight loaded as from_numpy(a).reshape(...))."""
    def leaf_view():
        return lib.zeros(8).view(4, 2).requires_grad_()

    def late():
        base = lib.zeros(6)
        view = base[:2]
        base.requires_grad_()
        return view.mul_(2)

    def rebased():
        base = lib.zeros(3)
        view = base[:2]
        view.mul_(lib.ones(2, requires_grad=True))
        return view.mul_(2)

    cases = [lambda: lib.view_as_complex(leaf_view()).mul_(2),
             lambda: leaf_view()[0].mul_(2),
             lambda: leaf_view().mul_(2),
             lambda: leaf_view().t()[1:].clamp_(min=0),
             late, rebased,
             lambda: lib.ones(3, requires_grad=True).detach()[:2].mul_(2)]
    out = []
    for case in cases:
        try:
            case()
            out.append(None)
        except RuntimeError as e:
            out.append(str(e))
    return out


def test_views_of_a_leaf_made_from_a_view_refuse_in_place_writes():
    assert _inplace_on_leaf_views(ember) == _inplace_on_leaf_views(torch)
