"""The short-time Fourier transform: stft and istft (and their Tensor methods).

Both are compositions of differentiable ops (padding, framing by indexing, the window
product, ``ember.fft``, overlap-add by ``index_add``), so their gradients come from those
ops. Their checks, messages and warnings follow PyTorch's: a message names the call as
PyTorch prints it (``stft(ember.FloatTensor[116], n_fft=16, ...) : ...``), and the
deprecation and missing-window warnings come once per process, as PyTorch's do.
"""

import contextlib

from ember import _dtype as D
from ember._tensor import Tensor
from ember._warn import warn_once
from ember.ops._scalars import int_arg

__all__ = ["stft", "istft"]

_NO_RETURN_COMPLEX = ("stft requires the return_complex parameter be given for real inputs, and "
                      "will further require that return_complex=True in a future PyTorch "
                      "release.")
_REAL_RESULT = ("stft with return_complex=False is deprecated. In a future pytorch release, "
                "stft will return complex tensors for all inputs, and return_complex=False will "
                "raise an error.\nNote: you can still call torch.view_as_real on the complex "
                "output to recover the old return format.")
_STFT_NO_WINDOW = ("A window was not provided. A rectangular window will be applied,which is "
                   "known to cause spectral leakage. Other windows such as torch.hann_window or "
                   "torch.hamming_window are recommended to reduce spectral leakage.To suppress "
                   "this warning and use a rectangular window, explicitly set "
                   "`window=torch.ones(n_fft, device=<device>)`.")
_ISTFT_NO_WINDOW = ("A window was not provided. A rectangular window will be applied.Please "
                    "provide the same window used by stft to make the inversion lossless.To "
                    "suppress this warning and use a rectangular window, explicitly set "
                    "`window=torch.ones(n_fft, device=<device>)`.")
_PADDED_TAIL = ("The length of signal is shorter than the length parameter. Result is being "
                "padded with zeros in the tail. Please check your center and hop_length "
                "settings.")


def _int(value, name, fname, optional=True):
    return None if value is None and optional else int_arg(value, fname, name)


def _shape(t):
    return ", ".join(str(n) for n in t.shape)


def _tensor_text(t):
    """The tensor's type as PyTorch's messages print it: ``type()`` for the legacy types, the
    backend form (``CPUComplexFloatType``) for complex and bfloat16 tensors."""
    if not (t.is_complex() or t.dtype is D.bfloat16):
        return t.type()
    device = "CPU" if t.device.type == "cpu" else "CUDA"
    return f"{device}{t.type().rsplit('.', 1)[-1][:-len('Tensor')]}Type"


def _window_text(window):
    return "None" if window is None else f"{_tensor_text(window)}{{[{_shape(window)}]}}"


def _flag(value):
    return "None" if value is None else str(int(value))


def _padded_window(window, win_length, n_fft, like):
    """The window (ones if None) centered in ``n_fft`` samples by zeros."""
    from ember._creation import ones
    from ember.ops.padding import constant_pad_nd
    if window is None:
        window = ones(win_length, dtype=D.FROM_NUMPY[like.real._data.dtype], device=like.device)
    left = (n_fft - win_length) // 2
    return constant_pad_nd(window, (left, n_fft - win_length - left))


def _frame_index(frames, hop_length, n_fft, device):
    """Positions ``t * hop_length + j`` of sample j of frame t: a (frames, n_fft) int64 tensor."""
    from ember._ranges import arange
    starts = arange(frames, device=device) * hop_length
    return starts.unsqueeze(-1) + arange(n_fft, device=device)


def _fft_dtype(t):
    if t.dtype in D.LOW_PRECISION:
        raise RuntimeError(f"MKL FFT doesn't support tensors of type: {t.dtype._torch_name}")


# --- stft -------------------------------------------------------------------------------------

def _per_example(aten, *operands):
    """Under vmap, PyTorch runs stft and istft once per example through its fallback (which
    warns once per call it makes), unless a transform differentiates inside the vmap (they
    decompose then, as ember's always do): its warnings and its refusal of an empty batch;
    returns the context to run ember's composition in, silencing its own ops' fallbacks
    (PyTorch's calls are unbatched)."""
    from ember.func._batched import STATE
    if not STATE.levels:
        return contextlib.nullcontext()
    from ember.func._batched import BatchedTensor, level_size
    from ember.func._batching import differentiated_within, repeating, warn_fallback
    levels = set()
    for x in operands:
        while type(x) is BatchedTensor:
            levels.add(x._level)
            x = x._value
    if not levels or any(differentiated_within(level) for level in levels):
        return contextlib.nullcontext()
    calls, size = 0, None
    for level in sorted(levels):            # the fallback takes the highest level first
        size = level_size(level)
        calls = 1 + size * calls
    for _ in range(calls if size else 1):
        warn_fallback(aten)
    if not size:
        raise RuntimeError(f"Batching rule not implemented for {aten}. The fallback path does "
                           f"not support vmap over dims of size 0.")
    return repeating(0)


# the native stft's signatures, which PyTorch's Python stft calls with every argument by position
_STFT_FORMS = (
    "Tensor input, int n_fft, int hop_length = None, int win_length = None, Tensor window = "
    "None, bool center = True, str pad_mode = \"reflect\", bool normalized = False, bool "
    "onesided = None, bool return_complex = None, bool align_to_window = None",
    "Tensor input, int n_fft, int hop_length = None, int win_length = None, Tensor window = "
    "None, bool normalized = False, bool onesided = None, bool return_complex = None, bool "
    "align_to_window = None",
)


def _parse_stft(input, n_fft, hop_length, win_length, window, *flags):
    """n_fft, hop_length and win_length as ints, or the native stft's "invalid combination"
    TypeError when an argument has a type its signatures refuse."""
    try:
        ints = [_int(v, name, "stft", optional=name != "n_fft") for v, name in (
            (n_fft, "n_fft"), (hop_length, "hop_length"), (win_length, "win_length"))]
        fits = (window is None or isinstance(window, Tensor)) and isinstance(flags[0], bool) \
            and all(f is None or isinstance(f, bool) for f in flags[1:])
    except TypeError:
        fits = False
    if not fits:
        from ember.ops._overloads import combination_error
        raise combination_error("stft", (input, n_fft, hop_length, win_length, window, *flags),
                                {}, _STFT_FORMS)
    return ints


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None,
         align_to_window=None):
    """The short-time Fourier transform of a signal (or a batch of them): the DFTs of its
    ``n_fft``-sample frames, ``hop_length`` apart, each multiplied by ``window``; shape
    (*, freq, frames), complex (or with real and imaginary parts last when
    ``return_complex`` is False)."""
    with _per_example("aten::stft", input, window):
        return _stft(input, n_fft, hop_length, win_length, window, center, pad_mode,
                     normalized, onesided, return_complex, align_to_window)


def _stft(input, n_fft, hop_length, win_length, window, center, pad_mode, normalized,
          onesided, return_complex, align_to_window):
    from ember.ops.padding import pad
    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    if center:      # (PyTorch's Python wrapper pads before its native stft parses n_fft)
        dims = input.ndim
        half = int(n_fft // 2)
        input = pad(input.view([1] * (3 - dims) + list(input.shape)), [half, half], pad_mode)
        input = input.view(input.shape[-dims:])
    n_fft, hop_length, win_length = _parse_stft(input, n_fft, hop_length, win_length, window,
                                                normalized, onesided, return_complex,
                                                align_to_window)
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    complex_window = window is not None and window.is_complex()
    if window is None:      # (before the return_complex check, which may raise)
        warn_once(_STFT_NO_WINDOW)
    given_complex = return_complex
    if return_complex is None:
        if not (input.is_complex() or complex_window):
            raise RuntimeError(_NO_RETURN_COMPLEX)
        return_complex = True
    elif not return_complex:
        warn_once(_REAL_RESULT)
    prefix = (f"stft({_tensor_text(input)}[{_shape(input)}], n_fft={n_fft}, "
              f"hop_length={hop_length}, win_length={win_length}, window={_window_text(window)}, "
              f"normalized={int(normalized)}, onesided={_flag(onesided)}, "
              f"return_complex={_flag(given_complex)}, align_to_window={_flag(align_to_window)})"
              f" : ")
    if not (input.is_floating_point() or input.is_complex()):
        raise RuntimeError(prefix + "expected a tensor of floating point or complex values")
    if input.ndim not in (1, 2):
        raise RuntimeError(prefix + "expected a 1D or 2D tensor")
    length = input.shape[-1]
    if n_fft <= 0 or n_fft > length:
        # (PyTorch's message gives win_length as n_fft)
        raise RuntimeError(prefix + f"expected 0 < n_fft < {length}, but got n_fft={win_length}")
    if hop_length <= 0:
        raise RuntimeError(prefix + f"expected hop_length > 0, but got hop_length={hop_length}")
    if not 0 < win_length <= n_fft:
        raise RuntimeError(prefix + f"expected 0 < win_length <= n_fft, but got "
                           f"win_length={win_length}")
    if window is not None and (window.ndim != 1 or window.shape[0] != win_length):
        raise RuntimeError(prefix + f"expected a 1D window tensor of size equal to "
                           f"win_length={win_length}, but got window with size "
                           f"{list(window.shape)}")
    full = input.is_complex() or complex_window
    if onesided and full:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    onesided = not full if onesided is None else onesided
    if align_to_window and win_length < n_fft:
        # frames start where the window does: its zero padding reaches outside the signal
        left = (n_fft - win_length) // 2
        input = pad(input, [left, n_fft - win_length - left])
        length = input.shape[-1]
    frames = 1 + (length - n_fft) // hop_length
    # as PyTorch: a batch of one for a 1-D signal, frames as a strided view, the transform,
    # then the (freq, frames) layout and the squeeze made in place (TransposeBackward1,
    # SqueezeBackward4)
    one_d = input.ndim == 1
    if one_d:
        input = input.unsqueeze(0)
    batch_stride, step = input.stride()
    segments = input.as_strided((input.shape[0], frames, n_fft),
                                (batch_stride, hop_length * step, step), input.storage_offset())
    if window is not None or win_length < n_fft:
        segments = segments * _padded_window(window, win_length, n_fft, input)
    _fft_dtype(segments)
    from ember.ops import spectral
    transform = spectral.rfft if onesided else spectral.fft
    spec = transform(segments, None, -1, "ortho" if normalized else None).transpose_(1, 2)
    if one_d:
        spec = spec.squeeze_(0)
    if return_complex:
        return spec
    from ember.ops.complex_ops import view_as_real
    return view_as_real(spec)


# --- istft ------------------------------------------------------------------------------------

def _istft_text(input, n_fft, hop_length, win_length, window, center, normalized, onesided,
                length, return_complex):
    device = "CPU" if input.device.type == "cpu" else "CUDA"
    kind = input.type().rsplit(".", 1)[-1][:-len("Tensor")]
    return (f"istft({device}{kind}Type[{_shape(input)}], n_fft={n_fft}, "
            f"hop_length={hop_length}, win_length={win_length}, window={_window_text(window)}, "
            f"center={int(center)}, normalized={int(normalized)}, onesided={_flag(onesided)}, "
            f"length={length}, return_complex={int(return_complex)})")


def _check_istft(input, n_fft, hop_length, win_length, window, onesided, prefix):
    """The frequency size's and the frame parameters' checks; returns ``onesided``."""
    if input.numel() == 0:
        raise RuntimeError(prefix + " : input tensor cannot be empty.")
    if input.ndim not in (2, 3):
        raise RuntimeError(prefix + f" : expected a tensor with 3 or 4 dimensions, but got "
                           f"{input.ndim + 1}")
    fft_size = input.shape[-2]
    onesided = fft_size != n_fft if onesided is None else onesided
    if onesided and fft_size != n_fft // 2 + 1:
        raise RuntimeError(prefix + f" : expected the frequency dimension (3rd to the last) of "
                           f"the input tensor to match n_fft / 2 + 1 when onesided=True, but "
                           f"got {fft_size}")
    if not onesided and fft_size != n_fft:
        raise RuntimeError(prefix + f" : expected the frequency dimension (3rd to the last) of "
                           f"the input tensor to match n_fft when onesided=False, but got "
                           f"{fft_size}")
    if not 0 < hop_length <= win_length:
        raise RuntimeError(prefix + " : expected 0 < hop_length <= win_length")
    if not 0 < win_length <= n_fft:
        raise RuntimeError(prefix + " : expected 0 < win_length <= n_fft")
    if window is not None and (window.ndim != 1 or window.shape[0] != win_length):
        raise RuntimeError(prefix + " : Invalid window shape. window has to be 1D and length of "
                           "`win_length`")
    return onesided


# the native istft's parameters after the input: (name, type, whether None is taken)
_ISTFT_PARAMS = (("n_fft", "int", False), ("hop_length", "int", True),
                 ("win_length", "int", True), ("window", "Tensor", True),
                 ("center", "bool", False), ("normalized", "bool", False),
                 ("onesided", "bool", True), ("length", "int", True),
                 ("return_complex", "bool", False))


def _parse_istft(*values):
    """The native istft's parser: its TypeError for the first argument of a wrong type (by
    position, unless passed by keyword); returns n_fft, hop_length, win_length and length."""
    for index, ((name, kind, optional), value) in enumerate(zip(_ISTFT_PARAMS, values)):
        if value is None and optional:
            continue
        if kind == "int":
            try:
                int_arg(value, "istft", name)
                continue
            except TypeError:
                pass
        elif isinstance(value, Tensor if kind == "Tensor" else bool):
            continue
        from ember.ops._call_site import call_site
        from ember.ops._dims import type_name
        site = call_site()
        keyword = site is not None and site.kind == "function" and site.passed_by_keyword(name)
        where = "" if keyword else f" (position {index + 2})"
        raise TypeError(f"istft(): argument '{name}'{where} must be {kind}, not "
                        f"{type_name(value)}")
    return [None if v is None else int_arg(v, "istft", "") for v in (values[:3] + values[7:8])]


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
          normalized=False, onesided=None, length=None, return_complex=False):
    """The inverse of ``stft``: the signal (or batch of them) whose STFT is ``input``
    (complex, (*, freq, frames)), by overlap-adding the windowed inverse DFTs of the frames
    and dividing by the overlap-added squared window (squared, not |w|^2, for a complex
    window, as in PyTorch)."""
    with _per_example("aten::istft", input, window):
        return _istft(input, n_fft, hop_length, win_length, window, center, normalized,
                      onesided, length, return_complex)


def _istft(input, n_fft, hop_length, win_length, window, center, normalized, onesided, length,
           return_complex):
    from ember._creation import zeros
    from ember.ops import spectral
    from ember.ops.padding import constant_pad_nd
    n_fft, hop_length, win_length, length = _parse_istft(
        n_fft, hop_length, win_length, window, center, normalized, onesided, length,
        return_complex)
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    if window is None:
        warn_once(_ISTFT_NO_WINDOW)
    if not input.is_complex():
        raise RuntimeError("istft requires a complex-valued input tensor matching the output "
                           "from stft with return_complex=True.")
    if input.ndim < 2:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-input.ndim - 1}, {input.ndim}], but got -3)")
    prefix = _istft_text(input, n_fft, hop_length, win_length, window, center, normalized,
                         onesided, length, return_complex)
    onesided = _check_istft(input, n_fft, hop_length, win_length, window, onesided, prefix)
    if return_complex:
        if onesided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
    elif window is not None and window.is_complex():
        raise RuntimeError("Complex windows are incompatible with return_complex=False")
    _fft_dtype(input)
    norm = "ortho" if normalized else "backward"
    # as PyTorch: a batch of one for a single spectrogram, frames and frequencies swapped on
    # the real view (a view_as_real ... view_as_complex chain in the graph)
    from ember.ops.complex_ops import view_as_complex, view_as_real
    from ember.ops.slicing import unfold_backward
    pairs = view_as_real(input)
    if input.ndim == 2:
        pairs = pairs.unsqueeze(0)
    spec = view_as_complex(pairs.transpose(1, 2))           # (batch, frames, freq)
    if return_complex:
        segments = spectral.ifft(spec, n_fft, -1, norm)
    else:
        if not onesided:
            spec = spec[..., :n_fft // 2 + 1]
        segments = spectral.irfft(spec, n_fft, -1, norm)
    window = _padded_window(window, win_length, n_fft, segments)
    segments = segments * window
    frames = input.shape[-1]
    expected = n_fft + hop_length * (frames - 1)
    index = _frame_index(frames, hop_length, n_fft, input.device).reshape(-1)
    signal = unfold_backward(segments, (segments.shape[0], expected), 1, n_fft, hop_length)
    squares = (window * window).expand(frames, n_fft).reshape(-1)
    envelope = zeros(expected, dtype=squares.dtype, device=input.device).index_add(
        0, index, squares)
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else expected - (start if center else 0)
    signal, envelope = signal[..., start:min(end, expected)], envelope[start:min(end, expected)]
    if envelope.numel() == 0:
        raise RuntimeError("min(): Expected reduction dim to be specified for input.numel() == "
                           "0. Specify the reduction dim with the 'dim' argument.")
    if bool(envelope.abs().min() < 1e-11):
        device = "CPU" if input.device.type == "cpu" else "CUDA"
        raise RuntimeError(prefix + f" window overlap add min: 1\n[ {device}BoolType{{}} ]")
    signal = signal / envelope
    if input.ndim == 2:
        signal = signal.squeeze(0)
    if end > expected:
        warn_once(_PADDED_TAIL)
        signal = constant_pad_nd(signal, (0, end - expected))
    return signal


def _stft_method(self, n_fft, hop_length=None, win_length=None, window=None, center=True,
                 pad_mode="reflect", normalized=False, onesided=None, return_complex=None,
                 align_to_window=None):
    import ember                            # ember.stft: autocast's wrapper of stft
    return ember.stft(self, n_fft, hop_length, win_length, window, center, pad_mode,
                      normalized, onesided, return_complex, align_to_window)


def _istft_method(self, n_fft, hop_length=None, win_length=None, window=None, center=True,
                  normalized=False, onesided=None, length=None, return_complex=False):
    # as PyTorch's Python method calls it (its parser's messages tell)
    return istft(self, n_fft, hop_length, win_length, window, center, normalized, onesided,
                 length, return_complex=return_complex)


for _fn, _name in ((stft, "stft"), (istft, "istft"), (_stft_method, "stft"),
                   (_istft_method, "istft")):
    _fn.__module__, _fn.__name__, _fn.__qualname__ = "ember", _name, _name
_stft_method.__doc__, _istft_method.__doc__ = stft.__doc__, istft.__doc__
Tensor.stft = _stft_method
Tensor.istft = _istft_method

PUBLIC = {"stft": stft, "istft": istft}
