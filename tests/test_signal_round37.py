"""Regression tests for what the round-37 signal fuzzer (windows, stft, istft) found in ember:
PyTorch's parser errors for stft's and the window functions' badly typed arguments, stft's
messages, the window functions' TensorOptions printout, general_cosine's requires_grad=None
and pad's refusal of a mode that is not a str."""

import pytest

import ember
import ember.nn.functional as F

_STFT_GOT = "stft() received an invalid combination of arguments - got ({}), but expected one of:"


def _raises(kind, fn):
    with pytest.raises(kind) as info:
        fn()
    return str(info.value)


@pytest.mark.parametrize("call, got", [
    (lambda x: ember.stft(x, 8, hop_length=1.5, return_complex=True),
     "Tensor, int, float, NoneType, NoneType, bool, NoneType, bool, NoneType"),
    (lambda x: ember.stft(x, 8, center=False, normalized=1),
     "Tensor, int, NoneType, NoneType, NoneType, int, NoneType, NoneType, NoneType"),
    (lambda x: ember.stft(x, 8, center=False, return_complex=(2,)),
     "Tensor, int, NoneType, NoneType, NoneType, bool, NoneType, tuple, NoneType"),
    (lambda x: ember.stft(x, 8, center=False, window=[1.0]),
     "Tensor, int, NoneType, NoneType, list, bool, NoneType, NoneType, NoneType"),
    (lambda x: x.stft(True, center=False, return_complex=True),
     "Tensor, bool, NoneType, NoneType, NoneType, bool, NoneType, bool, NoneType"),
    (lambda x: ember.stft(x, 8.0, return_complex=True),
     "Tensor, float, NoneType, NoneType, NoneType, bool, NoneType, bool, NoneType"),
])
def test_stft_bad_argument_types_list_both_signatures(call, got):
    message = _raises(TypeError, lambda: call(ember.ones(20)))
    lines = message.split("\n")
    assert lines[0] == _STFT_GOT.format(got)
    assert lines[1].startswith(" * (Tensor input, int n_fft, int hop_length = None, int "
                               "win_length = None, Tensor window = None, bool center = True,")
    assert lines[2].startswith(" * (Tensor input, int n_fft, int hop_length = None, int "
                               "win_length = None, Tensor window = None, bool normalized")
    assert lines[3].startswith("      didn't match because some of the arguments have invalid "
                               "types: (Tensor, ")


def test_stft_string_n_fft_fails_in_the_centering_pad():
    message = _raises(TypeError, lambda: ember.stft(ember.ones(20), "a"))
    assert message == "unsupported operand type(s) for //: 'str' and 'int'"


def test_stft_hop_length_tensor_is_an_int():
    out = ember.stft(ember.ones(20, dtype=ember.float64), 8, hop_length=ember.tensor(2),
                     window=ember.ones(8, dtype=ember.float64), return_complex=True)
    assert tuple(out.shape) == (5, 11)
    assert out[0, 0].item() == 8


def test_stft_message_keeps_return_complex_as_given():
    x = ember.ones(2, dtype=ember.complex64)
    message = _raises(RuntimeError, lambda: ember.stft(
        x, 4, window=ember.ones(4, dtype=ember.complex64), center=False))
    assert "return_complex=None, align_to_window=None) : expected 0 < n_fft < 2" in message


def test_stft_short_signal_message_names_win_length():
    message = _raises(RuntimeError, lambda: ember.stft(
        ember.ones(5, dtype=ember.float64), 6, win_length=2, center=False,
        return_complex=True))
    assert message.endswith(": expected 0 < n_fft < 5, but got n_fft=2")


_COMBINATION = "{}() received an invalid combination of arguments - got ({}), but expected one of:"


@pytest.mark.parametrize("call, name, got", [
    (lambda: ember.hamming_window(5, alpha="a"), "hamming_window", "int, alpha=str"),
    (lambda: ember.hamming_window(12, alpha="a", beta=0), "hamming_window",
     "int, beta=int, alpha=str"),
    (lambda: ember.kaiser_window(3, beta=12.0, dtype=ember.int64), "kaiser_window",
     "int, dtype=ember.dtype, beta=float"),
    (lambda: ember.kaiser_window("3", beta=1.0), "kaiser_window", "str, beta=float"),
    (lambda: ember.blackman_window("3", False), "blackman_window", "str, bool"),
    (lambda: ember.bartlett_window(12, 1, device="cpu", requires_grad=None),
     "bartlett_window", "int, int, requires_grad=NoneType, device=str"),
    (lambda: ember.blackman_window(2.5, periodic=False, dtype=ember.float32, device="cpu"),
     "blackman_window", "float, device=str, dtype=ember.dtype, periodic=bool"),
])
def test_window_type_errors_list_the_call_as_given(call, name, got):
    message = _raises(TypeError, call)
    lines = message.split("\n")
    assert lines[0] == _COMBINATION.format(name, got)
    assert lines[1] == (" * (int window_length, *, ember.dtype dtype = None, ember.layout "
                        "layout = None, ember.device device = None, bool pin_memory = False, "
                        "bool requires_grad = False)")


@pytest.mark.parametrize("call, message", [
    (lambda: ember.hann_window("3"),
     "hann_window(): argument 'window_length' (position 1) must be int, not str"),
    (lambda: ember.hann_window(window_length="3"),
     "hann_window(): argument 'window_length' must be int, not str"),
    (lambda: ember.hann_window(5.0),
     "hann_window(): argument 'window_length' (position 1) must be int, not float"),
    (lambda: ember.hann_window(3, 1, dtype=None, layout=None, device=None, pin_memory=False,
                               requires_grad=False),
     "hann_window(): argument 'periodic' (position 2) must be bool, not int"),
])
def test_window_type_errors_of_the_one_fitting_signature(call, message):
    assert _raises(TypeError, call) == message


def test_window_options_printout():
    def options(dtype, layout):
        return (f"TensorOptions(dtype={dtype}, device=cpu, layout={layout}, requires_grad=false "
                f"(default), pinned_memory=false, memory_format=(nullopt))")
    assert _raises(RuntimeError, lambda: ember.bartlett_window(
        9, layout=ember.sparse_coo)) == ("bartlett_window is not implemented for sparse types, "
                                         "got: " + options("float", "Sparse"))
    assert _raises(RuntimeError, lambda: ember.hann_window(
        5, layout=ember.sparse_coo)) == ("hann_window is not implemented for sparse types, got: "
                                         + options("float (default)", "Sparse"))
    assert _raises(RuntimeError, lambda: ember.kaiser_window(
        0, dtype=ember.int64, layout=ember.strided)) == (
            "kaiser_window expects floating point dtypes, got: " + options("long int", "Strided"))
    assert _raises(RuntimeError, lambda: ember.hann_window(5, dtype=ember.int64)) == (
        "hann_window expects floating point dtypes, got: "
        + options("long int", "Strided (default)"))


def test_window_values_after_the_parser_rework():
    assert ember.hamming_window(5, True, 0.5, 0.5, dtype=ember.float64).tolist() == \
        pytest.approx([0.0, 0.3454915028125263, 0.9045084971874737, 0.9045084971874737,
                       0.3454915028125263])
    assert ember.kaiser_window(3, False, 0.0, dtype=ember.float64).tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("name", ["general_hamming", "hann", "hamming", "nuttall", "blackman"])
def test_cosine_windows_refuse_requires_grad_none(name):
    fn = getattr(ember.signal.windows, name)
    assert _raises(TypeError, lambda: fn(6, requires_grad=None)) == \
        "tensor(): argument 'requires_grad' must be bool, not NoneType"
    assert fn(1, requires_grad=None).tolist() == [1.0]     # (made by ones())


@pytest.mark.parametrize("mode", [1.5, None])
def test_pad_mode_must_be_a_str(mode):
    x = ember.ones(1, 2, 5)
    kind = type(mode).__name__
    assert _raises(TypeError, lambda: F.pad(x, [1, 1], mode=mode)) == \
        f"pad(): argument 'mode' (position 3) must be str, not {kind}"
    assert _raises(TypeError, lambda: ember.stft(x[0], 4, pad_mode=mode,
                                                 return_complex=True)) == \
        f"pad(): argument 'mode' (position 3) must be str, not {kind}"
    assert F.pad(x, [1, 1], "replicate")[0, 0].tolist() == [1.0] * 7


def test_window_parameters_take_0_dim_tensors():
    got = ember.hamming_window(4, True, ember.tensor(1), dtype=ember.float64).tolist()
    assert got == pytest.approx([0.54, 1.0, 1.46, 1.0])
    got = ember.hamming_window(4, True, 0.3, ember.tensor(0.2), dtype=ember.float64).tolist()
    assert got == pytest.approx([0.1, 0.3, 0.5, 0.3])
    assert _raises(RuntimeError, lambda: ember.kaiser_window(4, True, ember.tensor(2j))) == \
        "value cannot be converted to type double without overflow"
    assert _raises(TypeError, lambda: ember.hamming_window(
        4, True, ember.tensor([0.5]))).startswith(_COMBINATION.format(
            "hamming_window", "int, bool, Tensor"))
    assert _raises(TypeError, lambda: ember.hann_window(ember.tensor(5.0))) == \
        "hann_window(): argument 'window_length' (position 1) must be int, not Tensor"
    assert ember.hann_window(ember.tensor(4), dtype=ember.float64).tolist() == \
        pytest.approx([0.0, 0.5, 1.0, 0.5])


@pytest.mark.parametrize("name", ["bartlett", "cosine", "exponential", "gaussian", "hann"])
def test_signal_window_bad_length_names_requires_grad_none(name):
    message = _raises(TypeError, lambda: getattr(ember.signal.windows, name)(
        2.5, requires_grad=None))
    assert message.startswith("linspace() received an invalid combination of arguments - got "
                              "(requires_grad=NoneType, device=NoneType, layout=ember.layout, "
                              "dtype=ember.dtype, steps=float, end=float, start=")


@pytest.mark.parametrize("call, message", [
    (lambda z: ember.istft(z, 4, 1, 3, center=(2,)),
     "istft(): argument 'center' must be bool, not tuple"),
    (lambda z: ember.istft(z, 4, 1, 3, None, (2,)),
     "istft(): argument 'center' (position 6) must be bool, not tuple"),
    (lambda z: ember.istft(z, 4, normalized="a"),
     "istft(): argument 'normalized' must be bool, not str"),
    (lambda z: z.istft(4, normalized="a"),
     "istft(): argument 'normalized' (position 7) must be bool, not str"),
    (lambda z: z.istft(4, length=(2,)),
     "istft(): argument 'length' (position 9) must be int, not tuple"),
    (lambda z: z.istft(4, 1, None, None, True, False, None, None, "a"),
     "istft(): argument 'return_complex' must be bool, not str"),
    (lambda z: ember.istft(z, 4.0),
     "istft(): argument 'n_fft' (position 2) must be int, not float"),
    (lambda z: ember.istft(z, 4, window=[1, 2]),
     "istft(): argument 'window' must be Tensor, not list"),
    (lambda z: ember.istft(z, 4, return_complex=None),
     "istft(): argument 'return_complex' must be bool, not NoneType"),
    (lambda z: ember.istft(z, 4, 1, 4, None, True, False, None, 3, 1.5),
     "istft(): argument 'return_complex' (position 10) must be bool, not float"),
])
def test_istft_parser_errors(call, message):
    z = ember.ones(3, 5, dtype=ember.complex128)
    assert _raises(TypeError, lambda: call(z)) == message


def test_istft_takes_integer_tensors_and_numpy_ints():
    import numpy as np
    z = ember.ones(3, 5, dtype=ember.complex128)
    out = ember.istft(z, 4, hop_length=ember.tensor(1), length=np.int64(5),
                      window=ember.ones(4, dtype=ember.float64))
    assert out.tolist() == pytest.approx([1 / 3, 0.25, 0.25, 0.0, 0.0])
