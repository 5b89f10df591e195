"""ember.fft's argument checks in PyTorch's order (round 36 fuzzer): the parser's type checks
first, then the dims and sizes, the dtype, the norm; fftfreq's out= against dtype= and
requires_grad."""

import pytest

import ember

F = ember.fft


@pytest.mark.parametrize("name", ["fft2", "fftn", "ifftn", "rfft2", "rfftn", "irfftn",
                                  "hfft2", "hfftn", "ihfftn"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_nd_transforms_refuse_the_dtype_before_the_norm(name, dtype):
    x = ember.ones(2, 4, dtype=getattr(ember, dtype))
    with pytest.raises(RuntimeError, match="^Unsupported dtype"):
        getattr(F, name)(x, norm="bad")
    with pytest.raises(RuntimeError, match="FFT dims must be unique"):
        getattr(F, name)(x, dim=(0, 0), norm="bad")     # the dims before the dtype


@pytest.mark.parametrize("name", ["ihfft2", "ihfftn"])
def test_ihfftn_refuses_a_bad_norm_before_a_complex_input(name):
    x = ember.ones(2, 4, dtype=ember.complex64)
    with pytest.raises(RuntimeError, match='Invalid normalization mode: "bad"'):
        getattr(F, name)(x, norm="bad")
    with pytest.raises(RuntimeError, match="Only supports floating-point dtypes"):
        getattr(F, name)(x)


@pytest.mark.parametrize("call", [
    lambda: F.irfftn(ember.ones(0)),
    lambda: F.hfftn(ember.ones(0)),
    lambda: F.irfft2(ember.ones(2, 0)),
    lambda: F.irfftn(ember.ones(3, 0), s=(-1, -1)),
])
def test_nd_c2r_names_the_empty_input_size_not_its_doubled_length(call):
    # the input's size is checked as given (0) before a c2r transform doubles it (-2)
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\) specified"):
        call()


def test_1d_c2r_names_the_doubled_length():
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(-2\) specified"):
        F.irfft(ember.ones(0, dtype=ember.complex64))
    with pytest.raises(RuntimeError, match=r"\(0\) specified"):
        F.irfftn(ember.ones(3, 1))


@pytest.mark.parametrize("call, message", [
    # the types before the dtype / complex / size checks
    (lambda: F.rfft(ember.ones(3, dtype=ember.complex64), norm=1.5),
     "fft_rfft(): argument 'norm' must be str, not float"),
    (lambda: F.ihfft(ember.ones(3, dtype=ember.bfloat16), n=(1,)),
     "fft_ihfft(): argument 'n' must be int, not tuple"),
    (lambda: F.rfftn(ember.ones(3, dtype=ember.complex64), dim="a"),
     "fft_rfftn(): argument 'dim' must be tuple of ints, not str"),
    (lambda: F.fftn(ember.ones(0), norm=2j),
     "fft_fftn(): argument 'norm' must be str, not complex"),
    (lambda: F.hfftn(ember.ones(3), dim=(0, 0), norm=[None]),
     "fft_hfftn(): argument 'norm' must be str, not list"),
    # positions, for arguments given by position
    (lambda: F.fft(ember.ones(3), 2, 0, 1.5),
     "fft_fft(): argument 'norm' (position 4) must be str, not float"),
    (lambda: F.ifft2(ember.ones(3, 3), None, (0, 1), True),
     "fft_ifft2(): argument 'norm' (position 4) must be str, not bool"),
    (lambda: F.fftn(ember.ones(3, 3), None, (1.5, 0)),
     "fft_fftn(): argument 'dim' (position 3) must be tuple of ints, but found element of "
     "type float at pos 0"),
    (lambda: F.fftn(ember.ones(3, 3), [None]),
     "fft_fftn(): argument 's' (position 2) must be tuple of ints, but found element of "
     "type NoneType at pos 0"),
    (lambda: F.fftn(ember.ones(3, 3), s=[None]),
     "fft_fftn(): argument 's' must be tuple of ints, not list"),
    (lambda: F.fftn(ember.ones(3, 3), s=ember.tensor([2, 2])),
     "fft_fftn(): argument 's' must be tuple of ints, not Tensor"),
])
def test_argument_types_are_checked_first(call, message):
    with pytest.raises(TypeError) as info:
        call()
    assert str(info.value) == message


@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
def test_fftfreq_out_refuses_another_dtype_first(name):
    out = ember.zeros(3)
    for dtype, torch_name in ((ember.float64, "Double"), (ember.int64, "Long"),
                              (ember.complex64, "ComplexFloat")):
        with pytest.raises(RuntimeError, match=f"dtype {torch_name} does not match dtype of "
                                               r"out parameter \(Float\)"):
            getattr(F, name)(4, out=out, dtype=dtype)
    assert getattr(F, name)(4, out=out, dtype=ember.float32) is out


def test_fftfreq_out_takes_requires_grad():
    out = ember.zeros(4)
    got = F.fftfreq(4, out=out, requires_grad=True)
    assert got is out and out.requires_grad and out.is_leaf
    assert out.tolist() == [0.0, 0.25, -0.5, -0.25]
    assert not F.rfftfreq(4, out=ember.zeros(3)).requires_grad
