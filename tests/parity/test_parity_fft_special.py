"""torch.fft, stft/istft and torch.special against PyTorch (audit round 15b): rfftfreq of a
negative length, the type names in stft/istft messages, gammaln's precision near 1 and 2."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _ulps64(a, b):
    a, b = (v.view(np.int64) for v in (a, b))
    a, b = (np.where(v < 0, -(v & 0x7FFFFFFFFFFFFFFF), v) for v in (a, b))
    return np.abs(a - b)


@pytest.mark.parametrize("n", [-1, -2, -3, -4, -7])
def test_rfftfreq_of_a_negative_length_divides_as_c(n):
    try:
        theirs = torch.fft.rfftfreq(n, 0.5)
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=str(e).replace("[", r"\[").replace("]", r"\]")):
            ember.fft.rfftfreq(n, 0.5)
        return
    ours = ember.fft.rfftfreq(n, 0.5)
    assert ours.shape == theirs.shape
    np.testing.assert_array_equal(np.signbit(ours.numpy()), np.signbit(theirs.numpy()))


def _message(lib, call):
    with pytest.raises(RuntimeError) as info:
        call(lib)
    return str(info.value).replace("ember.", "torch.")


@pytest.mark.parametrize("dtype", ["complex64", "complex128", "bfloat16", "float32"])
def test_stft_message_names_complex_and_bfloat16_types_as_torch(dtype):
    def call(lib):
        x = lib.ones(10, dtype=getattr(lib, dtype))
        return lib.stft(x, 8, window=lib.ones(12, dtype=getattr(lib, dtype)),
                        return_complex=True)
    assert _message(ember, call) == _message(torch, call)


def test_istft_message_names_a_complex_window_as_torch():
    def call(lib):
        spec = lib.ones(5, 10, dtype=lib.complex64)
        return lib.istft(spec, 8, window=lib.ones(12, dtype=lib.complex128))
    assert _message(ember, call) == _message(torch, call)


def test_gammaln_float64_keeps_its_precision_near_one_and_two():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(0.55, 2.6, 400),
                        [0.9999999, 1 - 1e-12, 1 + 2.0 ** -40, 1.9999999, 2 - 2.0 ** -30,
                         0.99, 1.375, 0.6, 2.5, 1.0, 2.0]])
    ours = ember.special.gammaln(ember.tensor(x)).numpy()
    theirs = torch.special.gammaln(torch.tensor(x)).numpy()
    assert _ulps64(ours, theirs).max() <= 4
    assert not np.signbit(ours[-2:]).any()          # lgamma(1) = lgamma(2) = +0.0


def test_lgamma_and_mvlgamma_float64_near_one():
    x = np.array([0.9999999, 1.0000001, 1.9999999])
    ours = ember.special.multigammaln(ember.tensor(x + 0.5), 2).numpy()
    theirs = torch.special.multigammaln(torch.tensor(x + 0.5), 2).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-14)
    ours = ember.lgamma(ember.tensor(x)).numpy()
    np.testing.assert_allclose(ours, torch.lgamma(torch.tensor(x)).numpy(), rtol=1e-14)


@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
@pytest.mark.parametrize("shape", [(2, 2), (4, 1), (3, 1), (5,), (0,)])
def test_frequencies_into_out_keep_its_shape_or_warn_as_arange(name, shape):
    def call(lib):
        out = lib.empty(shape, dtype=lib.float64)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = getattr(lib.fft, name)(4, out=out)
        assert result is out
        return result.numpy(), [str(w.message).split(" (Triggered")[0] for w in caught]
    (ours, ours_warned), (theirs, theirs_warned) = call(ember), call(torch)
    np.testing.assert_array_equal(ours, theirs)
    assert ours_warned == theirs_warned


def test_fftfreq_takes_a_bool_spacing():
    np.testing.assert_array_equal(ember.fft.fftfreq(4, d=True).numpy(),
                                  torch.fft.fftfreq(4, d=True).numpy())
