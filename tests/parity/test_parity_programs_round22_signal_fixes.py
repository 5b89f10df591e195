"""What the signal-processing programs of round 22 (test_parity_programs_round22_signal.py)
found: stft's graph (frames by as_strided, the in-place transpose and squeeze), the node names
of in-place view ops and of fft on a real signal, the nodes of the fft decompositions and of
istft (matched in round 23); and lazy conjugation (matched in round 28)."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

def _graph(t, limit=40):
    """The names of the nodes behind ``t``, depth first (every edge followed)."""
    names, stack = [], [t.grad_fn]
    while stack and len(names) < limit:
        node = stack.pop()
        names.append(type(node).__name__)
        stack.extend(reversed([f for f, _ in node.next_functions if f is not None]))
    return names


_STFT_CALLS = {
    "batched": lambda lib, x: lib.stft(x, 16, 4, window=lib.hann_window(16), return_complex=True),
    "one_d": lambda lib, x: lib.stft(x[0], 16, 4, window=lib.hann_window(16),
                                     return_complex=True),
    "no_center": lambda lib, x: lib.stft(x, 16, 4, window=lib.hamming_window(16), center=False,
                                         return_complex=True),
    "two_sided": lambda lib, x: lib.stft(x, 16, 4, window=lib.hann_window(16), onesided=False,
                                         normalized=True, return_complex=True),
    "short_window": lambda lib, x: lib.stft(x, 16, 4, win_length=10,
                                            window=lib.hann_window(10), return_complex=True),
    "complex_input": lambda lib, x: lib.stft(x * (1 + 1j), 16, 4, window=lib.hann_window(16),
                                             return_complex=True),
    "method": lambda lib, x: x.stft(16, 4, window=lib.hann_window(16), pad_mode="constant",
                                    return_complex=True),
}


@pytest.mark.parametrize("call", _STFT_CALLS, ids=str)
def test_stft_records_torchs_graph(call):
    """stft frames the signal by as_strided, transforms, then transposes (and squeezes a 1-D
    signal's batch of one) in place: TransposeBackward1 and SqueezeBackward4 at the top."""
    rng = np.random.default_rng(5)
    data = rng.standard_normal((2, 60)).astype(np.float32)

    def run(lib):
        x = lib.from_numpy(data.copy()).requires_grad_()
        spec = _STFT_CALLS[call](lib, x)
        spec.abs().pow(2).sum().backward()
        return _graph(spec), spec, x.grad

    names, spec, grad = run(ember)
    t_names, t_spec, t_grad = run(torch)
    assert names == t_names
    np.testing.assert_allclose(torch.view_as_real(t_spec.detach()).numpy(),
                               ember.view_as_real(spec.detach()).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grad.numpy(), t_grad.numpy(), rtol=1e-5, atol=1e-5)


_INPLACE_VIEWS = {
    "t_": lambda y: y.t_(), "transpose_": lambda y: y.transpose_(0, 1),
    "swapdims_": lambda y: y.swapdims_(1, 0), "swapaxes_": lambda y: y.swapaxes_(0, 1),
    "squeeze_": lambda y: y.unsqueeze(0).squeeze_(), "squeeze_dim": lambda y: y[None].squeeze_(0),
    "squeeze_dims": lambda y: y[None].squeeze_((0,)), "unsqueeze_": lambda y: y.unsqueeze_(1),
    "as_strided_": lambda y: y.as_strided_((2, 2), (1, 2)),
}


@pytest.mark.parametrize("call", _INPLACE_VIEWS, ids=str)
def test_in_place_view_ops_name_their_nodes_as_torch(call):
    """PyTorch numbers a view op's in-place overloads after its out-of-place ones:
    ``transpose_`` records TransposeBackward1, ``squeeze_(0)`` SqueezeBackward4."""
    def run(lib):
        x = lib.arange(12.0).reshape(3, 4).requires_grad_()
        y = _INPLACE_VIEWS[call](x * 1)
        (y * lib.arange(y.numel(), dtype=y.dtype).reshape(y.shape)).sum().backward()
        return _graph(y), x.grad.numpy()

    (names, grad), (t_names, t_grad) = run(ember), run(torch)
    assert names == t_names
    np.testing.assert_array_equal(grad, t_grad)


@pytest.mark.parametrize("dtype", ["float32", "complex64"])
def test_fft_of_a_real_signal_records_the_r2c_node(dtype):
    """fft of a real signal runs PyTorch's (two-sided) r2c kernel: FftR2CBackward0."""
    def run(lib):
        x = lib.arange(8.0).to(getattr(lib, dtype)).requires_grad_()
        return _graph(lib.fft.fft(x)), _graph(lib.fft.fft(x.reshape(2, 4), dim=0))

    assert run(ember) == run(torch)


def test_conj_is_a_lazy_view_as_in_torch():
    def run(lib):
        a = lib.tensor([1 + 2j, 3 - 1j])
        c = a.conj()
        flags = [c.is_conj(), c.resolve_conj().is_conj(), a.conj_physical().is_conj()]
        a.add_(1)
        return flags, c.tolist()

    assert run(ember) == run(torch)


@pytest.mark.parametrize("call", ["rfft_n", "fft_n", "hfft", "ihfft", "ifft_real", "fft2_real"])
def test_fft_decompositions_record_torchs_nodes(call):
    calls = {"rfft_n": lambda F, x: F.rfft(x, n=12), "fft_n": lambda F, x: F.fft(x, n=5),
             "hfft": lambda F, x: F.hfft(x * 1j), "ihfft": lambda F, x: F.ihfft(x),
             "ifft_real": lambda F, x: F.ifft(x), "fft2_real": lambda F, x: F.fft2(x)}

    def run(lib):
        x = lib.ones(4, 8, requires_grad=True)
        return _graph(calls[call](lib.fft, x))

    assert run(ember) == run(torch)


def test_istft_records_torchs_graph():
    def run(lib):
        spec = lib.ones(2, 9, 7, dtype=lib.complex64, requires_grad=True)
        return _graph(lib.istft(spec, 16, 4, window=lib.hann_window(16), length=30))

    assert run(ember) == run(torch)


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("in_dims", [0, 1])
def test_stft_under_vmap_matches_torch(center, in_dims):
    """Under vmap a batched tensor reports its per-example strides, as PyTorch's does, so
    stft's as_strided framing reads each example's own signal."""
    data = np.random.default_rng(6).standard_normal((2, 3, 40)).astype(np.float32)

    def run(lib):
        x = lib.from_numpy(data.copy())
        x = x if in_dims == 0 else x.transpose(0, 1)
        window = lib.hann_window(16)
        strides = []

        def one(s):
            strides.append(s.stride())
            return lib.stft(s, 16, 4, window=window, center=center, return_complex=True)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # PyTorch has no batching rule for stft
            spec = lib.func.vmap(one, in_dims=in_dims)(x)
        return lib.view_as_real(spec).numpy(), strides

    (ours, our_strides), (theirs, their_strides) = run(ember), run(torch)
    assert our_strides == their_strides
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
