"""stft and istft (ember/ops/stft.py): values against a NumPy reference and PyTorch's, round
trips, gradients, PyTorch's errors and its once-per-process warnings."""

import re
import warnings

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck
from ember.ops import stft as stft_module
from ember.testing import assert_close as _assert_close

F64, C128 = ember.float64, ember.complex128
_PAD = {"reflect": "reflect", "constant": "constant", "replicate": "edge", "circular": "wrap"}


def assert_close(actual, expected, **kwargs):
    if not isinstance(expected, ember.Tensor):
        expected = ember.as_tensor(np.asarray(expected))
    _assert_close(actual, expected, check_dtype=False, **kwargs)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _signal(*shape, complex=False, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if complex else x


def _numpy_stft(x, n_fft, hop_length=None, win_length=None, window=None, center=True,
                pad_mode="reflect", normalized=False, onesided=None, align_to_window=None):
    """The STFT as its definition reads: frames t * hop, window centered in n_fft samples."""
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    w = np.ones(win) if window is None else window
    left = (n_fft - win) // 2
    w = np.pad(w, (left, n_fft - win - left))
    if center:
        pads = [(0, 0)] * (x.ndim - 1) + [(n_fft // 2, n_fft // 2)]
        x = np.pad(x, pads, mode=_PAD[pad_mode])
    if align_to_window:
        x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(left, n_fft - win - left)])
    frames = 1 + (x.shape[-1] - n_fft) // hop
    segments = np.stack([x[..., t * hop:t * hop + n_fft] * w for t in range(frames)], -2)
    full = np.iscomplexobj(x) or np.iscomplexobj(w)
    one = not full if onesided is None else onesided
    spec = np.fft.rfft(segments, axis=-1) if one else np.fft.fft(segments, axis=-1)
    if normalized:
        spec = spec / np.sqrt(n_fft)
    return np.swapaxes(spec, -1, -2)


CASES = [dict(n_fft=16), dict(n_fft=16, hop_length=5, win_length=10),
         dict(n_fft=16, center=False), dict(n_fft=16, pad_mode="constant"),
         dict(n_fft=16, pad_mode="replicate"), dict(n_fft=16, pad_mode="circular"),
         dict(n_fft=16, normalized=True), dict(n_fft=16, onesided=False),
         dict(n_fft=15, hop_length=3), dict(n_fft=16, win_length=9, center=False),
         dict(n_fft=16, win_length=8, center=False, align_to_window=True)]


@pytest.mark.parametrize("kw", CASES, ids=str)
@pytest.mark.parametrize("shape", [(100,), (3, 70)])
@pytest.mark.parametrize("kind", ["real", "complex", "hann"])
def test_stft_matches_numpy(kw, shape, kind):
    x = _signal(*shape, complex=kind == "complex")
    win = kw.get("win_length", kw["n_fft"])
    window = ember.hann_window(win, dtype=F64) if kind == "hann" else None
    out = ember.stft(ember.tensor(x), window=window, return_complex=True, **kw)
    expected = _numpy_stft(x, window=None if window is None else np.asarray(window), **kw)
    assert out.dtype is C128 and out.shape == expected.shape
    assert_close(out, expected, rtol=1e-10, atol=1e-10)


def test_stft_matches_pytorch():
    # torch.stft(x, 4, hop_length=2, window=torch.hann_window(4, dtype=torch.float64),
    # return_complex=True) in PyTorch 2.13, and an aligned, normalized call
    x = ember.arange(10, dtype=F64) ** 2 / 10
    out = ember.stft(x, 4, hop_length=2, window=ember.hann_window(4, dtype=F64),
                     return_complex=True)
    expected = [[0.1, 0.9, 3.3, 7.3, 12.9, 12.9],
                [0, -0.4 + 0.4j, -1.6 + 0.8j, -3.6 + 1.2j, -6.4 + 1.6j, -6.4 - 1.6j],
                [-0.1, -0.1, -0.1, -0.1, -0.1, -0.1]]
    assert_close(out, np.array(expected), rtol=1e-12, atol=1e-12)
    out = ember.stft(x, 6, hop_length=3, win_length=4, center=False, align_to_window=True,
                     return_complex=True, normalized=True)
    expected = [[0.5715476066494083, 3.510935297989222, 9.38971068066885],
                [-0.3674234614174768 + 0.28284271247461906j,
                 -1.8983545506569635 + 0.38890872965260115j,
                 -4.53155602414888 - 0.14142135623730984j],
                [-0.0408248290463863 - 0.28284271247461906j,
                 -0.2245365597551248 - 1.0253048327204939j,
                 -0.7756717518813396 - 2.4041630560342617j],
                [0.24494897427831783, 0.7348469228349537, 1.2247448713915892]]
    assert_close(out, np.array(expected), rtol=1e-12, atol=1e-12)


def test_stft_result_dtypes_and_layouts():
    x = ember.tensor(_signal(2, 50), dtype=ember.float32)
    assert ember.stft(x, 8, return_complex=True).dtype is ember.complex64
    assert ember.stft(x, 8, window=ember.ones(8, dtype=F64), return_complex=True).dtype is C128
    assert ember.stft(x, 8, window=ember.ones(8, dtype=ember.int64),
                      return_complex=True).dtype is ember.complex64
    real = ember.stft(x, 8, return_complex=False)
    assert real.shape == (2, 5, 26, 2) and real.dtype is ember.float32
    assert_close(real, ember.view_as_real(ember.stft(x, 8, return_complex=True)))
    z = x.to(ember.complex64)
    assert ember.stft(z, 8).shape == (2, 8, 26)               # two-sided, complex by default
    assert ember.stft(x, 8, window=ember.ones(8, dtype=ember.complex64)).shape == (2, 8, 26)
    assert_close(x.stft(8, 2, return_complex=True), ember.stft(x, 8, 2, return_complex=True))


@pytest.mark.parametrize("kw", [dict(n_fft=16), dict(n_fft=16, hop_length=5, win_length=12),
                                dict(n_fft=16, normalized=True), dict(n_fft=15, hop_length=3),
                                dict(n_fft=16, center=False, hop_length=8)], ids=str)
@pytest.mark.parametrize("shape", [(104,), (3, 72)])      # whole frames when not centered
def test_istft_inverts_stft(kw, shape):
    x = ember.tensor(_signal(*shape))
    win = kw.get("win_length", kw["n_fft"])
    window = ember.hann_window(win, dtype=F64) if kw.get("center", True) else \
        ember.ones(win, dtype=F64)
    spec = ember.stft(x, window=window, return_complex=True, **kw)
    back = ember.istft(spec, window=window, length=shape[-1], **kw)
    assert back.shape == shape and back.dtype is F64
    assert_close(back, x, rtol=1e-10, atol=1e-10)
    assert_close(spec.istft(window=window, length=shape[-1], **kw), x, rtol=1e-10, atol=1e-10)


def test_istft_two_sided_and_complex():
    x = ember.tensor(_signal(60, complex=True))
    window = ember.hann_window(12, dtype=F64)
    spec = ember.stft(x, 12, window=window)
    back = ember.istft(spec, 12, window=window, return_complex=True, length=60)
    assert back.dtype is C128
    assert_close(back, x, rtol=1e-10, atol=1e-10)
    real = ember.tensor(_signal(60))
    spec = ember.stft(real, 12, window=window, onesided=False, return_complex=True)
    assert_close(ember.istft(spec, 12, window=window, length=60), real, rtol=1e-10, atol=1e-10)


def test_istft_matches_pytorch():
    # torch.istft(S * (1 + 0.5j), 4, hop_length=2, window=hann, length=11), S as in
    # test_stft_matches_pytorch: irfft ignores the imaginary parts of bins 0 and n/2
    x = ember.arange(10, dtype=F64) ** 2 / 10
    window = ember.hann_window(4, dtype=F64)
    spec = ember.stft(x, 4, hop_length=2, window=window, return_complex=True)
    out = ember.istft(spec * (1 + 0.5j), 4, hop_length=2, window=window, length=11)
    expected = [0, 0.2, 0.5, 1.2, 1.8, 3.0, 3.9, 5.6, 6.8, 8.1, 6.0]
    assert_close(out, np.array(expected), rtol=1e-12, atol=1e-12)


def test_istft_length_pads_and_truncates():
    window = ember.hann_window(16, dtype=F64)
    spec = ember.stft(ember.tensor(_signal(100)), 16, window=window, return_complex=True)
    assert ember.istft(spec, 16, window=window).shape == (100,)
    assert ember.istft(spec, 16, window=window, length=50).shape == (50,)
    padded = ember.istft(spec, 16, window=window, length=120)
    assert padded.shape == (120,) and not padded[108:].any()


def test_gradients():
    x = ember.tensor(_signal(2, 20), requires_grad=True)
    w = ember.hann_window(8, dtype=F64).add(0.1).requires_grad_()
    assert gradcheck(lambda x, w: ember.stft(x, 8, 3, window=w, return_complex=True), (x, w))
    assert gradgradcheck(lambda x, w: ember.stft(x[:1, :10], 4, 2, window=w[:4],
                                                 return_complex=True), (x, w))
    assert gradcheck(lambda x: ember.stft(x, 8, 4, win_length=6, center=False,
                                          return_complex=False, normalized=True), (x,))
    spec = ember.tensor(_signal(5, 7, complex=True), requires_grad=True)
    assert gradcheck(lambda s, w: ember.istft(s, 8, 3, window=w), (spec, w))
    assert gradcheck(lambda s, w: ember.istft(s, 8, 3, window=w, length=25), (spec, w))
    small = ember.tensor(_signal(3, 4, complex=True), requires_grad=True)
    assert gradgradcheck(lambda s, w: ember.istft(s, 4, 2, window=w[:4]), (small, w))


def _stft_prefix(shape, n_fft=16, hop=4, win=16, window="None", onesided="None",
                 align="None", kind="Float"):
    return re.escape(f"stft(ember.{kind}Tensor[{shape}], n_fft={n_fft}, hop_length={hop}, "
                     f"win_length={win}, window={window}, normalized=0, onesided={onesided}, "
                     f"return_complex=1, align_to_window={align}) : ")


@pytest.mark.parametrize("call,error,match", [
    (lambda x: ember.stft(x, 16), RuntimeError,
     "stft requires the return_complex parameter be given for real inputs, and will further "
     "require that return_complex=True in a future PyTorch release."),
    (lambda x: ember.stft(x.long(), 16), RuntimeError, "stft requires the return_complex"),
    (lambda x: ember.stft(x.long(), 16, return_complex=True), RuntimeError,
     _stft_prefix("116", kind="Long") + "expected a tensor of floating point or complex values"),
    (lambda x: ember.stft(x.reshape(2, 2, 25), 16, return_complex=True), RuntimeError,
     _stft_prefix("2, 2, 41") + "expected a 1D or 2D tensor"),
    (lambda x: ember.stft(x, 101, center=False, return_complex=True), RuntimeError,
     _stft_prefix("100", 101, 25, 101) + "expected 0 < n_fft < 100, but got n_fft=101"),
    (lambda x: ember.stft(x, 16, hop_length=0, return_complex=True), RuntimeError,
     _stft_prefix("116", hop=0) + "expected hop_length > 0, but got hop_length=0"),
    (lambda x: ember.stft(x, 16, win_length=17, return_complex=True), RuntimeError,
     _stft_prefix("116", win=17) + "expected 0 < win_length <= n_fft, but got win_length=17"),
    (lambda x: ember.stft(x, 16, window=ember.ones(10), return_complex=True), RuntimeError,
     _stft_prefix("116", window="ember.FloatTensor{[10]}") + re.escape(
         "expected a 1D window tensor of size equal to win_length=16, but got window with size "
         "[10]")),
    (lambda x: ember.stft(x[:10], 16, win_length=8, center=False, align_to_window=True,
                          return_complex=True), RuntimeError,
     _stft_prefix("10", win=8, align="1") + "expected 0 < n_fft < 10, but got n_fft=8"),
    (lambda x: ember.stft(x, 16, align_to_window=False, return_complex=True), RuntimeError,
     "stft align_to_window should only be set when center = false"),
    (lambda x: ember.stft(x.to(ember.complex64), 16, onesided=True), RuntimeError,
     "Cannot have onesided output if window or input is complex"),
    (lambda x: ember.stft(x.half(), 16, return_complex=True), RuntimeError,
     "MKL FFT doesn't support tensors of type: Half"),
    (lambda x: ember.stft(x[:5], 16, return_complex=True), RuntimeError,
     re.escape("Argument #4: Padding size should be less than the corresponding input "
               "dimension, but got: padding (8, 8) at dimension 2 of input [1, 1, 5]")),
    (lambda x: ember.stft(x, 16, pad_mode="foo", return_complex=True), NotImplementedError,
     "Unrecognised padding mode foo"),
    (lambda x: ember.stft(x, 16.0, return_complex=True), TypeError, "n_fft"),
])
def test_stft_errors(call, error, match):
    with pytest.raises(error, match=match):
        call(ember.ones(100))


def _istft_prefix(shape="9, 26", window="ember.FloatTensor{[16]}", n_fft=16, hop=4, win=16,
                  center=1, onesided="None", length="None"):
    return re.escape(f"istft(CPUComplexFloatType[{shape}], n_fft={n_fft}, hop_length={hop}, "
                     f"win_length={win}, window={window}, center={center}, normalized=0, "
                     f"onesided={onesided}, length={length}, return_complex=0)")


@pytest.mark.parametrize("call,error,match", [
    (lambda s, w: ember.istft(s.real, 16, window=w), RuntimeError,
     "istft requires a complex-valued input tensor matching the output from stft with "
     "return_complex=True."),
    (lambda s, w: ember.istft(s[None, None], 16, window=w), RuntimeError,
     _istft_prefix("1, 1, 9, 26") + " : expected a tensor with 3 or 4 dimensions, but got 5"),
    (lambda s, w: ember.istft(s[:, 0], 16, window=w), IndexError,
     re.escape("Dimension out of range (expected to be in range of [-2, 1], but got -3)")),
    (lambda s, w: ember.istft(s[:, :0], 16, window=w), RuntimeError,
     _istft_prefix("9, 0") + " : input tensor cannot be empty."),
    (lambda s, w: ember.istft(s, 18, window=ember.hann_window(18)), RuntimeError,
     _istft_prefix(window="ember.FloatTensor{[18]}", n_fft=18, win=18) + re.escape(
         " : expected the frequency dimension (3rd to the last) of the input tensor to match "
         "n_fft / 2 + 1 when onesided=True, but got 9")),
    (lambda s, w: ember.istft(s, 16, window=w, onesided=False), RuntimeError,
     re.escape("to match n_fft when onesided=False, but got 9")),
    (lambda s, w: ember.istft(s, 16, window=w, hop_length=0, win_length=17), RuntimeError,
     _istft_prefix(hop=0, win=17) + " : expected 0 < hop_length <= win_length"),
    (lambda s, w: ember.istft(s, 16, window=w, win_length=17), RuntimeError,
     _istft_prefix(win=17) + " : expected 0 < win_length <= n_fft"),
    (lambda s, w: ember.istft(s, 16, window=ember.ones(10)), RuntimeError,
     re.escape(" : Invalid window shape. window has to be 1D and length of `win_length`")),
    (lambda s, w: ember.istft(s, 16, window=w, center=False), RuntimeError,
     _istft_prefix(center=0) + re.escape(" window overlap add min: 1\n[ CPUBoolType{} ]")),
    (lambda s, w: ember.istft(s, 16, window=w, return_complex=True), RuntimeError,
     "Cannot have onesided output if window or input is complex"),
    (lambda s, w: ember.istft(s, 16, window=w.to(ember.complex64)), RuntimeError,
     "Complex windows are incompatible with return_complex=False"),
    (lambda s, w: ember.istft(s, 16, window=w, length=-3), RuntimeError,
     "min\\(\\): Expected reduction dim to be specified for input.numel\\(\\) == 0"),
    (lambda s, w: ember.istft(s, 16, window=w, length=3.0), TypeError,
     "istft\\(\\): argument 'length' must be int, not float"),
])
def test_istft_errors(call, error, match):
    window = ember.hann_window(16)
    spec = ember.stft(ember.ones(100), 16, window=window, return_complex=True)
    with pytest.raises(error, match=match):
        call(spec, window)


def _caught(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught]


def test_warnings_come_once_per_process():
    x = ember.ones(40)
    first = _caught(lambda: ember.stft(x, 8, return_complex=False))
    assert any(m.startswith("stft with return_complex=False is deprecated") for m in first)
    assert any(m.startswith("A window was not provided. A rectangular window will be "
                            "applied,which") for m in first)
    assert _caught(lambda: ember.stft(x, 8, return_complex=False)) == []
    spec = ember.stft(x, 8, window=ember.hann_window(8), return_complex=True)
    first = _caught(lambda: ember.istft(spec, 8))
    assert len(first) == 1 and first[0].startswith("A window was not provided. A rectangular "
                                                   "window will be applied.Please provide")
    assert _caught(lambda: ember.istft(spec, 8)) == []
    first = _caught(lambda: ember.istft(spec, 8, window=ember.hann_window(8), length=60))
    assert first == [stft_module._PADDED_TAIL]
