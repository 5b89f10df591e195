"""ember.fft beyond the OpInfo checks: frequency helpers, shifts, round trips, and the cases
the parity suite cannot compare."""

import numpy as np
import pytest

import ember
from ember.testing import assert_close as _assert_close

F = ember.fft


def assert_close(actual, expected, **kwargs):
    _assert_close(actual, expected, check_dtype=False, **kwargs)


# --- fftfreq, rfftfreq ------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 5, 8, 11])
@pytest.mark.parametrize("d", [1.0, 0.1, 3])
def test_fftfreq_matches_numpy(n, d):
    assert_close(F.fftfreq(n, d, dtype=ember.float64), np.fft.fftfreq(n, d), rtol=1e-15,
                 atol=0)
    assert_close(F.rfftfreq(n, d=d, dtype=ember.float64), np.fft.rfftfreq(n, d), rtol=1e-15,
                 atol=0)


def test_fftfreq_multiplies_by_the_rounded_reciprocal():
    # PyTorch computes k * (1 / (n d)) in the result dtype, not k / (n d): 3 * (1/30) rounds
    # differently from 3 / 30 in float32
    got = F.fftfreq(30, 1.0)
    k = np.concatenate([np.arange(15), np.arange(-15, 0)]).astype(np.float32)
    assert np.array_equal(np.asarray(got), k * np.float32(1 / 30))
    assert F.fftfreq(30).dtype is ember.float32
    assert np.array_equal(np.asarray(F.rfftfreq(6, 2.0, dtype=ember.float16)),
                          np.array([0, 1, 2, 3], np.float16) * np.float16(1 / 12))


def test_fftfreq_dtype_follows_the_default():
    ember.set_default_dtype(ember.float64)
    try:
        assert F.fftfreq(4).dtype is ember.float64
        assert F.fft(ember.arange(4)).dtype is ember.complex128
    finally:
        ember.set_default_dtype(ember.float32)
    assert F.fft(ember.arange(4)).dtype is ember.complex64


def test_fftfreq_options():
    t = F.fftfreq(4, d=ember.tensor(0.5), requires_grad=True)
    assert t.requires_grad and t.is_leaf
    assert_close(t.detach(), np.array([0.0, 0.5, -1.0, -0.5], np.float32))
    out = ember.empty(0, dtype=ember.float64)
    assert F.fftfreq(4, out=out) is out
    assert out.dtype is ember.float64 and out.tolist() == [0.0, 0.25, -0.5, -0.25]
    assert F.fftfreq(0).shape == (0,) and F.rfftfreq(-2).shape == (0,)
    with np.errstate(all="raise"):
        assert np.isnan(F.fftfreq(4, d=0)[0].item()) and F.fftfreq(4, d=0)[1].item() == np.inf


def test_rfftfreq_of_no_samples_divides_by_zero():
    # k / (n d) with n = 0: the single bin is 0 * inf = NaN, as in PyTorch
    assert np.isnan(F.rfftfreq(0).tolist()).all() and F.rfftfreq(0).shape == (1,)
    assert F.fftfreq(0).shape == (0,)


@pytest.mark.parametrize("call,error,match", [
    (lambda: F.fftfreq(4, dtype=ember.int64), RuntimeError,
     "fftfreq requires a floating point or complex dtype"),
    (lambda: F.rfftfreq(4, dtype=ember.int32), RuntimeError,
     "rfftfreq requires a floating point or complex dtype"),
    (lambda: F.fftfreq(4, dtype=ember.complex64), NotImplementedError,
     "\"arange_cpu\" not implemented for 'ComplexFloat'"),
    (lambda: F.fftfreq(-1), RuntimeError, r"negative dimension -1: \[-1\]"),
    (lambda: F.fftfreq(4.0), TypeError, "argument 'n' \\(position 1\\) must be int, not float"),
    (lambda: F.rfftfreq(True), TypeError, "must be int, not bool"),
    (lambda: F.fftfreq(4, d="a"), TypeError, "argument 'd' must be float, not str"),
])
def test_fftfreq_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- fftshift, ifftshift ----------------------------------------------------------------------

@pytest.mark.parametrize("shape,dim", [((5,), None), ((4, 5), None), ((4, 5), 0), ((4, 5), -1),
                                       ((2, 3, 4), (0, 2)), ((2, 3, 4), [1]), ((0, 3), None)])
def test_shifts_match_numpy(shape, dim):
    x = ember.arange(int(np.prod(shape))).reshape(shape)
    a = np.asarray(x)
    assert np.array_equal(np.asarray(F.fftshift(x, dim)), np.fft.fftshift(a, dim))
    assert np.array_equal(np.asarray(F.ifftshift(x, dim=dim)), np.fft.ifftshift(a, dim))
    assert np.array_equal(np.asarray(F.ifftshift(F.fftshift(x, dim), dim)), a)


def test_shift_puts_zero_frequency_in_the_middle():
    assert F.fftshift(F.fftfreq(5)).tolist() == pytest.approx([-0.4, -0.2, 0.0, 0.2, 0.4])
    assert F.fftshift(ember.arange(6).reshape(2, 3), dim=(0, 0)).tolist() == [[0, 1, 2],
                                                                               [3, 4, 5]]


def test_shift_gradient_is_the_inverse_shift():
    x = ember.randn(3, 4, requires_grad=True)
    w = ember.randn(3, 4)
    (F.fftshift(x) * w).sum().backward()
    assert_close(x.grad, F.ifftshift(w))


def test_shift_errors():
    with pytest.raises(RuntimeError, match="`shifts` required"):
        F.fftshift(ember.tensor(1.0))
    with pytest.raises(IndexError, match="Dimension specified as 0 but tensor has no dim"):
        F.ifftshift(ember.tensor(1.0), dim=0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        F.fftshift(ember.zeros(4, 5), dim=5)
    with pytest.raises(TypeError, match="argument 'dim' must be tuple of ints, not float"):
        F.fftshift(ember.zeros(4), dim=1.0)
    with pytest.raises(TypeError, match="argument 'input' \\(position 1\\) must be Tensor"):
        F.fftshift([1.0, 2.0])


# --- transforms -------------------------------------------------------------------------------

def test_round_trips():
    ember.manual_seed(0)
    x = ember.randn(3, 5, 6, dtype=ember.float64)
    z = ember.randn(3, 5, 6, dtype=ember.complex128)
    for norm in (None, "ortho", "forward"):
        assert_close(F.ifftn(F.fftn(z, norm=norm), norm=norm), z)
        assert_close(F.irfft(F.rfft(x, norm=norm), n=6, norm=norm), x)
        assert_close(F.irfftn(F.rfftn(x, norm=norm), s=x.shape, norm=norm), x)
        assert_close(F.hfft(F.ihfft(x, norm=norm), n=6, norm=norm), x)
        assert_close(F.hfftn(F.ihfftn(x, norm=norm), s=x.shape, norm=norm), x)
        assert_close(F.ifft2(F.fft2(z, norm=norm), norm=norm), z)


def test_real_signal_has_hermitian_spectrum():
    x = ember.randn(8, dtype=ember.float64)
    full = np.asarray(F.fft(x))
    assert_close(F.rfft(x), full[:5])
    assert_close(F.ihfft(x), np.conj(full[:5]) / 8)


def test_ihfftn_out_fills_for_one_dim():
    # torch 2.13 leaves out= untouched when ihfftn transforms a single dim (a bug the parity
    # suite lists as a known difference); ember fills it
    x = ember.randn(4, 5)
    for kwargs in ({"dim": 1}, {"s": (5,)}, {}):
        out = ember.empty(0, dtype=ember.complex64)
        assert F.ihfftn(x, **kwargs, out=out) is out
        assert_close(out, F.ihfftn(x, **kwargs))


def test_padding_an_empty_spectrum_gives_zeros():
    # NumPy's irfft reads uninitialized memory here; ember returns the zero signal
    for dtype in (ember.complex64, ember.complex128):
        assert F.irfft(ember.zeros(0, dtype=dtype), n=4).tolist() == [0.0] * 4
        assert F.hfftn(ember.zeros(0, 2, dtype=dtype), s=(2, 3)).tolist() == [[0.0] * 3] * 2


def test_empty_batches_transform_to_empty():
    # PyTorch's MKL kernels raise "Inconsistent configuration parameters" here (its CUDA and
    # pocketfft kernels do not); ember returns the empty result
    assert F.fft(ember.zeros(0, 4)).shape == (0, 4)
    assert F.rfft(ember.zeros(3, 0), dim=0).shape == (2, 0)
    assert F.irfft(ember.zeros(0, 4, dtype=ember.complex64)).shape == (0, 6)


def test_gradient_of_real_to_complex_counts_hermitian_pairs():
    # sum(|rfft(x)|^2) weights each bin once, so the gradient differs from the full
    # spectrum's 2 n x: bins 1..(n-1)//2 are missing their mirror
    x = ember.randn(6, dtype=ember.float64, requires_grad=True)
    (F.rfft(x).abs() ** 2).sum().backward()
    full = ember.fft.fft(x.detach())
    w = np.array([1, 1, 1, 1, 0, 0], dtype=np.float64)
    expected = 2 * np.real(np.fft.ifft(np.asarray(full) * w) * 6)
    assert_close(x.grad, expected)


@pytest.mark.parametrize("call, expected", [
    # a real signal's spectrum: its one-sided half, then the mirrored conjugates; so the
    # zero imaginary parts at DC and Nyquist are +0.0 (a complex transform would give -0.0)
    (lambda: F.fft(ember.arange(4.)), "tensor([ 6.+0.j, -2.+2.j, -2.+0.j, -2.-2.j])"),
    (lambda: F.fft(ember.tensor([1., -1., 1., -1.]), norm="ortho"),
     "tensor([0.+0.j, 0.+0.j, 2.+0.j, 0.-0.j])"),
    (lambda: F.ifft(ember.arange(4.)),
     "tensor([ 1.5000-0.0000j, -0.5000-0.5000j, -0.5000-0.0000j, -0.5000+0.5000j])"),
    # the 2-D and N-D transforms of real input are complex transforms
    (lambda: F.fft2(ember.arange(6.).reshape(2, 3)),
     "tensor([[15.+0.0000j, -3.+1.7321j, -3.-1.7321j],\n"
     "        [-9.+0.0000j,  0.+0.0000j,  0.+0.0000j]])"),
    (lambda: F.ifftn(ember.arange(6.).reshape(2, 3)),
     "tensor([[ 2.5000+0.0000j, -0.5000-0.2887j, -0.5000+0.2887j],\n"
     "        [-1.5000+0.0000j,  0.0000+0.0000j,  0.0000+0.0000j]])"),
    # ihfft2: the conjugated one-sided transform of the last dim, then an inverse c2c one
    (lambda: F.ihfft2(ember.arange(6.).reshape(2, 3)),
     "tensor([[ 2.5000-0.0000j, -0.5000-0.2887j],\n"
     "        [-1.5000+0.0000j,  0.0000+0.0000j]])"),
])
def test_real_input_spectra_have_pytorchs_signs_of_zero(call, expected):
    assert str(call()) == expected


@pytest.mark.parametrize("name, out_dtype, message", [
    ("fft", ember.float32, "fft expects a complex output tensor, but got Float"),
    ("rfft", ember.int64, "rfft expects a complex output tensor, but got Long"),
    ("fft2", ember.float64, "fftn expects a complex output tensor, but got Double"),
    ("ifft2", ember.float32, "fftn expects a complex output tensor, but got Float"),
    ("ihfft2", ember.float32, "ihfftn expects a complex output tensor, but got Float"),
    ("irfft", ember.complex64, "irfft expects a floating point output tensor, but got "
     "ComplexFloat"),
    ("hfft2", ember.int32, "hfftn expects a floating point output tensor, but got Int"),
])
def test_out_must_be_of_the_results_kind(name, out_dtype, message):
    x = ember.arange(12.).reshape(3, 4)
    if name in ("irfft", "hfft2"):
        x = x.to(ember.complex64)
    with pytest.raises(RuntimeError) as info:
        getattr(F, name)(x, out=ember.empty(0, dtype=out_dtype))
    assert str(info.value) == message


def test_out_of_another_precision_is_cast_into():
    out = ember.empty(0, dtype=ember.complex128)
    F.fft(ember.arange(4.), out=out)
    assert out.dtype is ember.complex128 and out.tolist() == [6, -2 + 2j, -2, -2 - 2j]
    half = ember.empty(0, dtype=ember.float16)
    F.irfft(F.rfft(ember.arange(4.)), out=half)
    assert half.dtype is ember.float16 and half.tolist() == [0, 1, 2, 3]


def test_namespace():
    assert F.fft.__module__ == "ember.fft" and F.fft.__name__ == "fft"
    assert F.fft.__doc__
    names = {"fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2",
             "irfft2", "rfftn", "irfftn", "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn",
             "fftfreq", "rfftfreq", "fftshift", "ifftshift"}
    assert names <= set(dir(F))
    assert not hasattr(ember, "rfftn") and not hasattr(ember.Tensor, "rfft")
