"""The random programs of test_parity_signal_fuzz_round37.py: one seeded call of a window
function (``hann_window`` ... ``kaiser_window``, ``signal.windows.*``), of ``stft`` or of
``istft``, with random arguments, run in ember and torch side by side.

Windows get a random length (negative, 0, 1, of a wrong type), periodic / sym, their own
parameters (alpha, beta, center, tau, std, a; bad values too), dtype (16-bit, int, complex),
layout, device and requires_grad. stft gets a 1-D or batched signal (real or complex, 16-bit
to float64, ints; contiguous, transposed or stepped; 0-d and 3-D ones for the errors), n_fft,
hop_length, win_length, a window (shorter than n_fft, of a wrong size, complex), center,
pad_mode, normalized, onesided and return_complex (True, False or missing), by keyword or
position; istft a complex spectrogram (an stft's result or random values) with length,
center, onesided, return_complex and windows that fail the NOLA check. Compared: values,
dtype, shape, requires_grad, node name, errors, warnings (TORCH_WARN_ONCE ones made to warn
every time), stft's strides, and for float64 / complex128 inputs the gradient, the
double-backward gradient and the forward-mode tangent.
"""

import random

import numpy as np

import ember
from tests.parity._fft_fuzz_round36_gen import (
    SKIP, Diverged, _call, _grads, _kw, _maybe, _tangents, compare, make_input)

try:
    import torch
except ImportError:     # the test module skips
    torch = None


def _call_always(fn, *args):
    """``_call`` with PyTorch's and ember's once-per-process warnings given every time."""
    before = torch.is_warn_always_enabled(), ember.is_warn_always_enabled()
    torch.set_warn_always(True)
    ember.set_warn_always(True)
    try:
        return _call(fn, *args)
    finally:
        torch.set_warn_always(before[0])
        ember.set_warn_always(before[1])


def _caller(path, args, kwargs, with_x=True):
    """``lib.<path>([x, ]*args, **kwargs)`` with the arguments written out in the call, as a
    user writes them (ember reads from the bytecode how an argument was given)."""
    names = [f"a{i}" for i in range(len(args))] + [f"{k}=k{i}" for i, k in enumerate(kwargs)]
    params = "".join(f", a{i}" for i in range(len(args))) + \
        "".join(f", k{i}" for i in range(len(kwargs)))
    head = "x" + (", " if names else "") if with_x else ""
    fn = eval(f"lambda lib, x{params}: lib.{path}({head}{', '.join(names)})")  # noqa: S307
    values = list(args) + list(kwargs.values())
    return lambda lib, x: fn(lib, x, *[v(lib) if callable(v) else v for v in values])


def _label(path, args, kwargs):
    shown = [repr(a) for a in args] + [f"{k}={getattr(v, 'label', v)!r}"
                                      for k, v in kwargs.items()]
    return f"{path}({', '.join(shown)})"


class _Lib:
    """An argument that names a library object (a dtype, a layout, a window tensor)."""

    def __init__(self, label, make):
        self.label, self.make = label, make

    def __call__(self, lib):
        return self.make(lib)

    def __repr__(self):
        return self.label


def _dtype_arg(name):
    return _Lib(name, lambda lib: getattr(lib, name))


def _split(rng, given, order):
    """``given`` (a dict, in signature order ``order``) split into a positional prefix and
    keywords."""
    keys = [k for k in order if k in given]
    cut = 0
    while cut < len(keys) and keys[cut] == order[cut] and rng.random() < (0.85 if cut == 0
                                                                          else 0.5):
        cut += 1
    return [given[k] for k in keys[:cut]], {k: given[k] for k in keys[cut:]}


def _factory(rng, kw, float_only=False):
    if rng.random() < 0.4:
        kw["dtype"] = _dtype_arg(rng.choice(
            ["float32", "float64", "float64", "float16", "bfloat16", "int64", "complex64"]
            if not float_only else ["float32", "float64"]))
    if rng.random() < 0.1:
        layout = rng.choice(["sparse_coo", "strided"])
        kw["layout"] = _Lib(layout, lambda lib: getattr(lib, layout))
    if rng.random() < 0.1:
        kw["device"] = "cpu"
    if rng.random() < 0.25:
        kw["requires_grad"] = rng.choice([True, True, False, None])


# --- windows -------------------------------------------------------------------------------

_TOP = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]
_SIGNAL = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]


def _length(rng):
    r = rng.random()
    if r < 0.05:
        return rng.choice([2.5, True, "3", None, -1])
    return rng.choice([0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12])


def _top_window(rng):
    name = rng.choice(_TOP)
    given = {"window_length": _length(rng)}
    order = ["window_length", "periodic"]
    if rng.random() < 0.6:
        given["periodic"] = rng.random() < 0.5 if rng.random() < 0.95 else 1
    if name == "hamming_window":
        order += ["alpha", "beta"]
        if rng.random() < 0.5:
            given["alpha"] = rng.choice([0.54, 0.5, 1, -0.3, 2.0, "a"])
        if rng.random() < 0.4:
            given["beta"] = rng.choice([0.46, 0.5, 0, 1.5])
    if name == "kaiser_window":
        order += ["beta"]
        if rng.random() < 0.6:
            given["beta"] = rng.choice([12.0, 0.0, 5, 1.5, -2.0, 30.0, "b"])
    args, kw = _split(rng, given, order)
    _factory(rng, kw)
    return name, _label(name, args, kw), _caller(name, args, kw, with_x=False)


def _signal_window(rng):
    name = rng.choice(_SIGNAL)
    kw = {}
    if rng.random() < 0.6:
        kw["sym"] = rng.random() < 0.5
    if name == "exponential":
        if rng.random() < 0.4:
            kw["center"] = rng.choice([None, 0.0, 1.5, -2.0, 4])
        if rng.random() < 0.5:
            kw["tau"] = rng.choice([1.0, 0.5, 3, 0.0, -1.0])
    if name == "gaussian" and rng.random() < 0.6:
        kw["std"] = rng.choice([1.0, 0.5, 2, 7.0, 0.0, -1.0])
    if name == "kaiser" and rng.random() < 0.6:
        kw["beta"] = rng.choice([12.0, 0.0, 5, 1.5, -2.0, 30.0])
    if name == "general_hamming" and rng.random() < 0.6:
        kw["alpha"] = rng.choice([0.54, 0.5, 1.0, -0.5, 2])
    if name == "general_cosine":
        kw["a"] = rng.choice([[0.5, 0.5], (0.42, 0.5, 0.08), [1.0], [], 0.5, [1, 2j],
                              [0.3635819, 0.4891775, 0.1365995, 0.0106411]])
    _factory(rng, kw)
    args = [_length(rng)]
    path = f"signal.windows.{name}"
    return name, _label(path, args, kw), _caller(path, args, kw, with_x=False)


# --- stft / istft ----------------------------------------------------------------------------

_SIG_DTYPES = ["float32", "float64", "float64", "float64", "complex128", "complex128",
               "complex64", "float16", "bfloat16", "int64"]


def _signal_spec(rng, npr):
    dtype = rng.choice(_SIG_DTYPES)
    r = rng.random()
    nd = 0 if r < 0.03 else 3 if r < 0.06 else 1 if r < 0.6 else 2
    length = rng.choice([0, 1, 2, 3, 5, 8, 9, 10, 12, 16, 17, 20, 24, 31, 40])
    shape = [rng.choice([1, 2, 3]) for _ in range(nd - 1)] + [length] if nd else []
    if nd == 2 and rng.random() < 0.05:
        shape[0] = 0
    layout = rng.choice(["contiguous", "contiguous", "transposed", "stepped"])
    raw = npr.standard_normal(shape)
    if dtype.startswith("complex"):
        raw = raw + 1j * npr.standard_normal(shape)
    if dtype.startswith("int"):
        raw = np.round(raw * 3)
    grad = dtype in ("float64", "complex128", "float32") and rng.random() < 0.6
    return dtype, tuple(shape), layout, raw, grad


def _window_arg(rng, size, dtype):
    r = rng.random()
    if r < 0.3:
        return SKIP
    if r < 0.35:
        return None
    if rng.random() < 0.1:
        size = max(size + rng.choice([-1, 1]), 0)
    kind = rng.choice(["hann_window", "hamming_window", "ones", "rand", "bartlett_window"])
    wdtype = dtype if rng.random() < 0.8 else rng.choice(["float32", "float64", "complex128"])
    if wdtype in ("float16", "bfloat16", "int64"):
        wdtype = "float32"
    if wdtype.startswith("complex") and kind.endswith("window"):
        kind = "rand"
    seed = rng.randrange(1 << 30)

    def make(lib):
        dt = getattr(lib, wdtype)
        if kind == "rand":
            values = np.random.default_rng(seed).random(size) + 0.2
            if dt.is_complex:
                values = values + 0.3j
            return lib.tensor(values).to(dt)
        if kind == "ones":
            return lib.ones(size, dtype=dt)
        return getattr(lib, kind)(size, dtype=dt)
    return _Lib(f"{kind}({size}, {wdtype})", make)


def _stft(rng, spec):
    length = spec[1][-1] if spec[1] else 1
    dtype = spec[0]
    n_fft = rng.choice([1, 2, 3, 4, 4, 5, 6, 7, 8, 8, 8, max(length, 1), max(length // 2, 1),
                        length + 1, 0])
    given = {"n_fft": n_fft}
    if rng.random() < 0.5:
        given["hop_length"] = rng.choice([1, 2, 3, 4, max(n_fft, 1), 0, None])
    if rng.random() < 0.4:
        given["win_length"] = rng.choice([1, 2, 3, n_fft, n_fft, n_fft + 1, None])
    win = given.get("win_length") or n_fft
    window = _window_arg(rng, win, dtype)
    if window is not SKIP:
        given["window"] = window
    if rng.random() < 0.4:
        given["center"] = rng.random() < 0.5
    if rng.random() < 0.3:
        given["pad_mode"] = rng.choice(["reflect", "constant", "replicate", "circular", "bad"])
    if rng.random() < 0.3:
        given["normalized"] = rng.random() < 0.5
    if rng.random() < 0.3:
        given["onesided"] = rng.choice([True, False, None])
    r = rng.random()
    if r < 0.9:
        given["return_complex"] = True if r < 0.7 else False if r < 0.85 else None
    if rng.random() < 0.1:
        given["align_to_window"] = rng.choice([True, False, None])
    order = ["n_fft", "hop_length", "win_length", "window", "center", "pad_mode",
             "normalized", "onesided", "return_complex", "align_to_window"]
    if rng.random() < 0.03:
        given[rng.choice(list(given))] = rng.choice([1.5, "a", (2,)])
    args, kw = _split(rng, given, order)
    method = rng.random() < 0.2
    path = "Tensor.stft" if method else "stft"
    return "stft", _label(path, args, kw), _caller(path, args, kw)


def _round_trip(rng, spec):
    """stft then istft with the same frames (the window's squares overlap everywhere)."""
    length = spec[1][-1] if spec[1] else 1
    n_fft = rng.choice([2, 4, 4, 5, 6, 8, 8])
    hop = rng.choice([1, max(n_fft // 4, 1), max(n_fft // 2, 1)])
    win = rng.choice([n_fft, n_fft, max(n_fft - 1, 1)])
    dtype = "float64" if spec[0] in ("float64", "complex128") else "float32"
    kind = rng.choice(["hann_window", "hamming_window", "ones"])
    center = rng.random() < 0.8
    normalized = rng.random() < 0.3
    out_length = _maybe(rng, rng.choice([None, length, max(length - 2, 0), length + 3]), 0.4)
    complex_out = spec[0].startswith("complex")
    label = (f"stft_istft(n_fft={n_fft}, hop_length={hop}, win_length={win}, "
             f"window={kind}, center={center}, normalized={normalized}, "
             f"length={out_length})")

    def call(lib, x):
        window = getattr(lib, kind)(win, dtype=getattr(lib, dtype))
        z = lib.stft(x, n_fft, hop, win, window, center, normalized=normalized,
                     return_complex=True)
        return lib.istft(z, n_fft, hop, win, window, center, normalized,
                         **_kw(length=out_length, return_complex=complex_out))
    return "istft", label, call


def _istft_spec(rng, npr):
    """A complex spectrogram: (freq, frames) or (batch, freq, frames)."""
    n_fft = rng.choice([2, 3, 4, 4, 5, 6, 8, 8])
    onesided = rng.random() < 0.7
    freq = n_fft // 2 + 1 if onesided else n_fft
    if rng.random() < 0.08:
        freq += rng.choice([-1, 1])
    frames = rng.choice([1, 2, 3, 4, 5, 6, 8])
    r = rng.random()
    shape = (freq, frames) if r < 0.6 else (rng.choice([1, 2]), freq, frames) if r < 0.95 \
        else rng.choice([(freq,), (1, 1, freq, frames), (0, frames)])
    dtype = rng.choice(["complex128"] * 6 + ["complex64"] * 3 + ["float64"])
    raw = npr.standard_normal(shape)
    if dtype.startswith("complex"):
        raw = raw + 1j * npr.standard_normal(shape)
        if onesided and len(shape) >= 2 and raw.size:   # a real DC bin, as an stft gives
            raw[..., 0, :] = raw[..., 0, :].real
    layout = rng.choice(["contiguous", "contiguous", "transposed", "stepped"])
    grad = dtype in ("complex128", "float64") and rng.random() < 0.6
    return (dtype, shape, layout, raw, grad), n_fft


def _istft(rng, spec, n_fft):
    dtype = spec[0]
    given = {"n_fft": n_fft if rng.random() < 0.9 else n_fft + rng.choice([-1, 1])}
    if rng.random() < 0.6:
        given["hop_length"] = rng.choice([1, 1, 2, 2, 3, max(n_fft // 2, 1), n_fft, 0])
    if rng.random() < 0.4:
        given["win_length"] = rng.choice([1, 2, n_fft, n_fft, n_fft - 1, n_fft + 1])
    win = given.get("win_length") or n_fft
    window = _window_arg(rng, win, "float64" if dtype == "complex128" else "float32")
    if window is not SKIP:
        given["window"] = window
    if rng.random() < 0.5:
        given["center"] = rng.random() < 0.6
    if rng.random() < 0.3:
        given["normalized"] = rng.random() < 0.5
    if rng.random() < 0.3:
        given["onesided"] = rng.choice([True, False, None])
    if rng.random() < 0.4:
        given["length"] = rng.choice([None, 0, 1, 4, 8, 12, 20, 30])
    if rng.random() < 0.3:
        given["return_complex"] = rng.random() < 0.5
    order = ["n_fft", "hop_length", "win_length", "window", "center", "normalized",
             "onesided", "length", "return_complex"]
    if rng.random() < 0.04:
        given[rng.choice(order)] = rng.choice([1.5, "a", (2,), None])
    args, kw = _split(rng, given, order)
    path = "Tensor.istft" if rng.random() < 0.2 else "istft"
    return "istft", _label(path, args, kw), _caller(path, args, kw)


def _strides(label, tval, evl):
    """stft's result: PyTorch's (freq, frames) layout is a transposed one, as ember's."""
    if not isinstance(tval, torch.Tensor) or not tval.numel():
        return
    # (a size-1 dim's stride is the FFT library's accident)
    tstr, estr = ([s for s, n in zip(t.stride(), t.shape) if n > 1] for t in (tval, evl))
    if tstr != estr:
        raise Diverged((label, "strides", tval.stride(), evl.stride()))


def _program(rng, npr):
    r = rng.random()
    if r < 0.2:
        return None, _top_window(rng)
    if r < 0.4:
        return None, _signal_window(rng)
    if r < 0.65:
        spec = _signal_spec(rng, npr)
        return spec, _stft(rng, spec)
    if r < 0.75:
        spec = _signal_spec(rng, npr)
        return spec, _round_trip(rng, spec)
    spec, n_fft = _istft_spec(rng, npr)
    return spec, _istft(rng, spec, n_fft)


def run_program(seed):
    """One random call; None when both agree, else (label, what, torch's, ember's)."""
    rng = random.Random(seed)
    npr = np.random.default_rng(seed)
    spec, (name, label, fn) = _program(rng, npr)
    if spec is not None:
        label = f"{spec[0]}{list(spec[1])} {spec[2]} grad={spec[4]}: {label}"
    else:
        label = f"window: {label}"
    gseed = rng.randrange(1 << 30)
    try:
        res = {}
        for lib in (torch, ember):
            leaf, x = make_input(lib, spec) if spec is not None else (None, None)
            res[lib] = (leaf, _call_always(fn, lib, x))
        if name in _SIGNAL and "requires_grad=True" in label:
            # PyTorch's result hangs from its internal linspace's graph, ember's is a leaf
            for lib in (torch, ember):
                (ok, out), warns = res[lib][1]
                if ok:
                    res[lib] = (None, ((ok, out.detach()), warns))
        compare(label, res[torch][1], res[ember][1])
        (tok, tval), _ = res[torch][1]
        if tok and name == "stft" and spec[2] != "transposed":
            # (a transposed signal's: MKL's choice of its output layout)
            _strides(label, tval, res[ember][1][0][1])
        if tok and spec is not None and spec[4]:
            _grads(label, res, gseed)
            if spec[0] in ("float64", "complex128") and isinstance(tval, torch.Tensor):
                _tangents(label, spec, fn, gseed)
    except Diverged as exc:
        return exc.args[0]
    return None


if __name__ == "__main__":
    from tests.parity._fuzz_cli import main
    main(run_program, shown=3)
