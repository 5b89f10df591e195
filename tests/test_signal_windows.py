"""ember.signal.windows: values against SciPy's windows, PyTorch's float32 rounding, the
length edge cases, dtypes, device, requires_grad and PyTorch's errors."""

import re

import numpy as np
import pytest
import scipy.signal.windows as sw

import ember
from ember.signal import windows as W

CASES = [("bartlett", {}), ("blackman", {}), ("cosine", {}), ("exponential", {}),
         ("exponential", {"tau": 2.5}), ("gaussian", {"std": 1.0}), ("gaussian", {"std": 0.37}),
         ("general_cosine", {"a": [0.3, 0.2, 0.4, 0.1]}), ("general_hamming", {"alpha": 0.54}),
         ("general_hamming", {"alpha": 0.61}), ("hamming", {}), ("hann", {}),
         ("kaiser", {"beta": 12.0}), ("kaiser", {"beta": 3.3}), ("nuttall", {})]


def _scipy(name, M, sym, kwargs):
    if name == "exponential":        # SciPy's centre and tau are positional
        return sw.exponential(M, None, kwargs.get("tau", 1.0), sym)
    return getattr(sw, name)(M, *kwargs.values(), sym=sym)


@pytest.mark.parametrize("name, kwargs", CASES)
@pytest.mark.parametrize("sym", [True, False])
@pytest.mark.parametrize("M", [2, 5, 8, 33])
def test_values_match_scipy(name, kwargs, sym, M):
    got = W.__dict__[name](M, sym=sym, dtype=ember.float64, **kwargs)
    assert got.dtype == ember.float64 and tuple(got.shape) == (M,)
    np.testing.assert_allclose(np.asarray(got), _scipy(name, M, sym, kwargs), rtol=1e-13,
                               atol=1e-15)
    single = np.asarray(W.__dict__[name](M, sym=sym, **kwargs))
    assert single.dtype == np.float32
    np.testing.assert_allclose(single, np.asarray(got), rtol=1e-6, atol=5e-7)


def test_exponential_with_a_centre_matches_scipy():
    for center, tau in ((1.3, 1.0), (-2, 0.5), (7, 3)):
        np.testing.assert_allclose(
            np.asarray(W.exponential(6, center=center, tau=tau, sym=False, dtype=ember.float64)),
            sw.exponential(6, center, tau, sym=False), rtol=1e-14)


def test_float32_values_round_as_pytorch_does():
    # PyTorch 2.13's float32 values: its linspace counts the second half back from the end,
    # so periodic windows are not mirror images to the last bit
    assert np.asarray(W.bartlett(5, sym=False)).tolist() == [
        0.0, 0.3999999761581421, 0.800000011920929, 0.7999999523162842, 0.3999999761581421]
    assert np.asarray(W.general_hamming(5, alpha=0.5, sym=False)).tolist()[1::3] == [
        0.34549152851104736, 0.3454914391040802]
    assert np.asarray(W.blackman(5)).tolist() == [
        -1.4901161193847656e-08, 0.3400000333786011, 0.9999999403953552, 0.3399999737739563,
        -1.4901161193847656e-08]
    assert np.asarray(W.exponential(5, sym=False)).tolist() == [
        0.08208499848842621, 0.22313016653060913, 0.6065306663513184, 0.6065306663513184,
        0.22313016653060913]
    assert np.asarray(W.cosine(2)).tolist() == [0.7071067690849304, 0.7071067690849304]


def test_linspace_of_many_values_stays_exact():
    # the ends come back exactly; the middle is -1 + 50000 * step rounded once (one fused
    # multiply-add, as PyTorch's linspace), a hair under 0, so the peak is a hair under 1
    w = np.asarray(W.bartlett(100001, dtype=ember.float64))
    assert w[0] == 0 and w[-1] == 0 and w[50000] == 1 - 2 ** -53
    np.testing.assert_allclose(w, sw.bartlett(100001), rtol=0, atol=1e-15)


@pytest.mark.parametrize("name, kwargs", CASES)
def test_lengths_zero_and_one(name, kwargs):
    for sym in (True, False):
        assert np.asarray(W.__dict__[name](0, sym=sym, **kwargs)).shape == (0,)
        assert np.asarray(W.__dict__[name](1, sym=sym, **kwargs)).tolist() == [1.0]


def test_parameters_shape_the_window():
    assert np.asarray(W.general_cosine(3, a=[0.5])).tolist() == [0.5, 0.5, 0.5]
    assert np.asarray(W.general_cosine(3, a=(1, 2))).tolist() == [-1.0, 3.0, -1.0]
    assert np.asarray(W.general_hamming(3, alpha=2)).tolist() == [3.0, 1.0, 3.0]
    assert np.asarray(W.kaiser(4, beta=0.0)).tolist() == [1.0] * 4
    assert np.asarray(W.exponential(4, center=1.0, sym=False, dtype=ember.float64)).tolist() == \
        [np.exp(-1), 1.0, np.exp(-1), np.exp(-2)]
    assert np.asarray(W.gaussian(3, std=float("inf"))).tolist() == [1.0] * 3
    wide, narrow = W.gaussian(9, std=3.0), W.gaussian(9, std=1.0)
    assert float(wide[0]) > float(narrow[0])


def test_dtype_device_and_requires_grad():
    w = W.hann(6, dtype=ember.float64, device="cpu", requires_grad=True)
    assert w.dtype == ember.float64 and w.device.type == "cpu" and w.requires_grad
    assert not W.hann(6).requires_grad
    assert W.nuttall(np.int64(4)).shape == (4,)
    old = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:
        assert W.kaiser(4).dtype == ember.float64
    finally:
        ember.set_default_dtype(old)


@pytest.mark.parametrize("name, label", [
    ("bartlett", "bartlett"), ("blackman", "blackman"), ("cosine", "cosine"),
    ("exponential", "exponential"), ("gaussian", "gaussian"), ("kaiser", "kaiser"),
    ("hann", "general_cosine"), ("hamming", "general_cosine"), ("nuttall", "general_cosine"),
    ("general_hamming", "general_cosine")])
def test_common_errors(name, label):
    f = W.__dict__[name]
    with pytest.raises(ValueError, match=f"^{label} requires non-negative window length, "
                                         f"got M=-3$"):
        f(-3, dtype=ember.int32)
    with pytest.raises(ValueError, match=f"^{label} is implemented for strided tensors only, "
                                         f"got: None$"):
        f(3, layout=None)
    for dtype in (ember.float16, ember.bfloat16, ember.int64, ember.complex64):
        with pytest.raises(ValueError, match=re.escape(
                f"{label} expects float32 or float64 dtypes, got: {dtype}")):
            f(3, dtype=dtype)


def test_parameter_errors():
    with pytest.raises(ValueError, match=r"^Standard deviation must be positive, got: 0 instead"):
        W.gaussian(0, std=0)
    with pytest.raises(ValueError, match=r"^Tau must be positive, got: -2 instead\.$"):
        W.exponential(3, tau=-2)
    with pytest.raises(ValueError, match="^Center must be None for symmetric windows$"):
        W.exponential(3, center=1.0)
    with pytest.raises(ValueError, match=r"^beta must be non-negative, got: -1 instead\.$"):
        W.kaiser(0, beta=-1)
    for a in (None, 5):
        with pytest.raises(TypeError, match="^Coefficients must be a list/tuple$"):
            W.general_cosine(3, a=a)
    with pytest.raises(ValueError, match="^Coefficients cannot be empty$"):
        W.general_cosine(3, a=[])
    with pytest.raises(TypeError, match="^must be real number, not complex$"):
        W.general_cosine(3, a=[0.5, 1j])
    with pytest.raises(TypeError, match="positional argument"):
        W.hann(3, False)


def test_a_length_linspace_cannot_take():
    # PyTorch's checks pass a float or bool M on to linspace, which refuses it
    for call, got in ((lambda: W.hann(2.5), "steps=float, end=float, start=int"),
                      (lambda: W.cosine(True), "steps=bool, end=float, start=float"),
                      (lambda: W.kaiser(3.0, device="cpu"), "steps=float, end=Tensor, "
                                                            "start=Tensor")):
        with pytest.raises(TypeError, match=re.escape(
                "linspace() received an invalid combination of arguments - got "
                "(requires_grad=bool, device=")) as caught:
            call()
        assert got in str(caught.value)
        assert " * (Number start, Number end, int steps, *, Tensor out = None" in \
            str(caught.value)
    assert "device=str" in _message(lambda: W.kaiser(3.0, device="cpu"))
    assert np.asarray(W.hann(1.0)).tolist() == [1.0] and W.hann(0.0).shape == (0,)


def _message(call):
    try:
        call()
    except TypeError as e:
        return str(e)
    raise AssertionError("no TypeError")
