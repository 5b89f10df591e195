"""Window functions (ember/_windows.py): values against SciPy and against PyTorch's (including
its rounding in float32, float16 and bfloat16), dtypes, lengths 0 and 1, and PyTorch's
errors."""

import re

import numpy as np
import pytest
import scipy.signal.windows as windows

import ember
from ember.testing import assert_close

NAMES = ("hann_window", "hamming_window", "blackman_window", "bartlett_window",
         "kaiser_window")


def _scipy(name, n, periodic, **kw):
    fn = {"hann_window": windows.hann, "hamming_window": windows.hamming,
          "blackman_window": windows.blackman, "bartlett_window": windows.bartlett,
          "kaiser_window": lambda m, sym: windows.kaiser(m, kw.get("beta", 12.0), sym)}[name]
    return fn(n, sym=not periodic)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 31, 64])
@pytest.mark.parametrize("periodic", [True, False])
def test_values_match_scipy(name, n, periodic):
    w = getattr(ember, name)(n, periodic, dtype=ember.float64)
    assert w.dtype is ember.float64 and w.shape == (n,)
    assert_close(w, ember.tensor(_scipy(name, n, periodic)), rtol=1e-12, atol=1e-14)


def test_parameters():
    w = ember.hamming_window(9, False, 0.6, 0.3, dtype=ember.float64)
    k = np.arange(9)
    assert_close(w, ember.tensor(0.6 - 0.3 * np.cos(2 * np.pi * k / 8)), rtol=1e-12, atol=0)
    assert_close(ember.hamming_window(9, False, 0.5, 0.5, dtype=ember.float64),
                 ember.hann_window(9, False, dtype=ember.float64), rtol=0, atol=1e-15)
    w = ember.kaiser_window(10, False, 4.5, dtype=ember.float64)
    assert_close(w, ember.tensor(windows.kaiser(10, 4.5)), rtol=1e-12, atol=0)
    assert_close(ember.kaiser_window(10, periodic=True, beta=4.5, dtype=ember.float64),
                 ember.tensor(windows.kaiser(10, 4.5, sym=False)), rtol=1e-12, atol=0)


# PyTorch 2.13's values: each step of its kernels rounds to the result dtype (16-bit floats
# compute each step in float32, with their scalars rounded to the 16-bit type first)
TORCH = [
    ("hann_window", (8,), ember.float32,
     [0.0, 0.1464466154575348, 0.5, 0.8535534143447876, 1.0, 0.853553295135498, 0.5,
      0.14644649624824524]),
    ("hamming_window", (7, False, 0.6, 0.3), ember.float32,
     [0.30000001192092896, 0.4500000476837158, 0.7500000596046448, 0.9000000357627869, 0.75,
      0.4500000476837158, 0.30000001192092896]),
    ("blackman_window", (7,), ember.float32,
     [-2.9802322387695312e-08, 0.09045341610908508, 0.4591829478740692, 0.9203636646270752,
      0.9203635454177856, 0.4591829776763916, 0.09045332670211792]),
    ("bartlett_window", (6, False), ember.float32,
     [0.0, 0.4000000059604645, 0.800000011920929, 0.7999999523162842, 0.3999999761581421, 0.0]),
    ("kaiser_window", (6, True, 5.0), ember.float64,
     [0.036710892271286676, 0.3282019573723212, 0.7753221044454067, 1.0, 0.7753221044454067,
      0.3282019573723212]),
    ("hann_window", (10,), ember.bfloat16,
     [0.0, 0.095703125, 0.345703125, 0.65625, 0.90625, 1.0, 0.8984375, 0.6484375, 0.34375,
      0.095703125]),
    ("hamming_window", (9,), ember.float16,
     [0.080078125, 0.187744140625, 0.460205078125, 0.76953125, 0.97265625, 0.9716796875,
      0.7705078125, 0.460205078125, 0.1875]),
    ("blackman_window", (9, False), ember.bfloat16,
     [0.0, 0.06640625, 0.33984375, 0.7734375, 1.0, 0.7734375, 0.3359375, 0.06640625, 0.0]),
    ("bartlett_window", (7,), ember.float16,
     [0.0, 0.28564453125, 0.5712890625, 0.85693359375, 0.857421875, 0.572265625,
      0.2861328125]),
]


@pytest.mark.parametrize("name,args,dtype,expected", TORCH, ids=lambda v: str(v)[:20])
def test_values_match_pytorch(name, args, dtype, expected):
    w = getattr(ember, name)(*args, dtype=dtype)
    assert w.dtype is dtype
    # exact, but for a few ulps of the math library's cos and I0
    tol = 0 if dtype.itemsize == 2 else 2e-7
    assert_close(w.double(), ember.tensor(expected, dtype=ember.float64), rtol=0, atol=tol)


@pytest.mark.parametrize("name", NAMES)
def test_lengths_zero_and_one(name):
    fn = getattr(ember, name)
    for periodic in (True, False):
        assert fn(0, periodic).shape == (0,)
        assert fn(1, periodic).tolist() == [1.0]
    assert fn(1, dtype=ember.complex64).dtype is ember.complex64     # as PyTorch's ones
    assert fn(0, dtype=ember.complex64).shape == (0,)


@pytest.mark.parametrize("name", NAMES)
def test_dtypes_device_and_requires_grad(name):
    fn = getattr(ember, name)
    assert fn(5).dtype is ember.float32
    with _default_dtype(ember.float64):
        assert fn(5).dtype is ember.float64
    w = fn(5, requires_grad=True)
    assert w.requires_grad and w.is_leaf
    assert fn(5, device="cpu", layout=ember.strided).device.type == "cpu"
    assert fn(window_length=ember.tensor(4)).shape == (4,)
    assert fn(4, periodic=True).tolist() == fn(4).tolist()


class _default_dtype:
    def __init__(self, dtype):
        self.dtype = dtype

    def __enter__(self):
        self.saved = ember.get_default_dtype()
        ember.set_default_dtype(self.dtype)

    def __exit__(self, *exc):
        ember.set_default_dtype(self.saved)


def _options(dtype):
    return (f"TensorOptions(dtype={dtype}, device=cpu, layout=Strided (default), "
            f"requires_grad=false (default), pinned_memory=false, memory_format=(nullopt))")


@pytest.mark.parametrize("name", NAMES)
def test_errors(name):
    fn = getattr(ember, name)
    for dtype, ctype in ((ember.int64, "long int"), (ember.int32, "int"),
                         (ember.uint8, "unsigned char"), (ember.bool, "bool")):
        for n in (5, 0, -1):            # the dtype is checked first
            with pytest.raises(RuntimeError, match=re.escape(
                    f"{name} expects floating point dtypes, got: {_options(ctype)}")):
                fn(n, dtype=dtype)
    with pytest.raises(RuntimeError, match=f"{name} requires non-negative window_length, got "
                                           f"window_length=-1"):
        fn(-1)
    with pytest.raises(NotImplementedError, match="\"arange_cpu\" not implemented for "
                                                  "'ComplexFloat'"):
        fn(2, dtype=ember.complex64)
    with pytest.raises(NotImplementedError, match="'Float8_e5m2'"):
        fn(5, dtype=ember.float8_e5m2)
    for bad in (5.0, True):
        with pytest.raises(TypeError, match=f"{name}\\(\\): argument 'window_length' "
                                            f"\\(position 1\\) must be int, not "
                                            f"{type(bad).__name__}"):
            fn(bad)
    with pytest.raises(TypeError, match=re.escape(
            f"{name}() received an invalid combination of arguments - got (int, int)")):
        fn(5, 1)


def test_overloads_of_the_parameters():
    # hamming_window's alpha needs periodic, beta needs alpha; kaiser_window's beta needs
    # periodic: PyTorch has no overload for the others
    for call, got in ((lambda: ember.hamming_window(5, alpha=0.5), "(int, alpha=float)"),
                      (lambda: ember.hamming_window(5, True, beta=0.5),
                       "(int, bool, beta=float)"),
                      (lambda: ember.kaiser_window(5, beta=3.0), "(int, beta=float)")):
        with pytest.raises(TypeError, match=re.escape(f"received an invalid combination of "
                                                      f"arguments - got {got}")):
            call()
    assert ember.hamming_window(5, periodic=True, alpha=0.5).shape == (5,)
    assert ember.kaiser_window(5, True, 5).shape == (5,)
    assert ember.kaiser_window(5, True, True).shape == (5,)     # a bool is a float to PyTorch
    assert ember.kaiser_window(5, True, float("nan")).isnan().all()
