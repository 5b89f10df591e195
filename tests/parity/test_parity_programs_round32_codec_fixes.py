"""What the learned compression and audio programs of round 32
(test_parity_programs_round32_codec*.py) found, pinned against PyTorch.

- In-place view ops on a batched tensor inside vmap (``transpose_``, ``squeeze_``,
  ``unsqueeze_``, ``t_``, ``swapdims_``) restrided its value but left the shape the function
  saw unchanged: ``stft`` (which ends in ``transpose_`` and ``squeeze_``) gave (1, frames,
  freq) per example, and a per-example multi-scale spectral loss (``vmap`` of stft then
  istft, or of ``grad`` through it) raised in istft. Now the logical shape follows.
- Under vmap, PyTorch runs stft and istft per example through its fallback, warning
  "performance drop ... aten::stft" once per call it makes (none when a transform
  differentiates inside); ember warned nothing for stft and "aten::_unfold_backward" for
  istft. Now PyTorch's warnings, counts and empty-batch error. unfold's gradient's own
  fallback is named aten::unfold_backward, as PyTorch's.
- ``masked_fill`` with a per-example tensor value (SpecAugment's mean fill) warned
  "aten::masked_fill" where PyTorch's loop names the overload, "aten::masked_fill.Tensor".
- The gradient of reflect/replicate/circular pads under vmap (jacrev, per-example grads)
  took the fallback loop with a warning PyTorch does not give; now batched at once.
- ``is_contiguous()`` of a batched tensor inside vmap was always False (it looked at the
  placeholder array); now the per-example strides' answer, as PyTorch's, and other memory
  formats raise PyTorch's NYI error (``contiguous`` too).
- ``amax``/``amin`` and ``linalg.vector_norm`` (inf and negative orders) over an empty dim
  named the wrapped dim (1) where PyTorch names it as written (-2)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _spectral_loss(lib, x, y):
    window = lib.hann_window(16)
    loss = 0
    for n_fft, hop in ((16, 4), (8, 2)):
        w = window if n_fft == 16 else lib.hann_window(8)
        sx = lib.stft(x, n_fft, hop, window=w, return_complex=True).abs()
        sy = lib.stft(y, n_fft, hop, window=w, return_complex=True).abs()
        log_diff = lib.log(sx + 1e-7) - lib.log(sy + 1e-7)
        loss = loss + (sx - sy).abs().mean() + log_diff.abs().mean()
    rebuilt = lib.istft(lib.stft(x, 16, 4, window=window, return_complex=True), 16, 4,
                        window=window, length=x.shape[-1])
    return loss + (rebuilt - y).pow(2).mean()


def _run(lib, transform):
    rng = np.random.default_rng(3230)
    x = lib.from_numpy(rng.standard_normal((3, 64)).astype(np.float32))
    y = lib.from_numpy(rng.standard_normal((3, 64)).astype(np.float32))
    if transform == "vmap":
        out = lib.func.vmap(lambda a, b: _spectral_loss(lib, a, b))(x, y)
    elif transform == "vmap_grad":
        out = lib.func.vmap(lib.func.grad(lambda a, b: _spectral_loss(lib, a, b)))(x, y)
    else:
        out = lib.func.vmap(lambda a: lib.stft(a, 16, 4, window=lib.hann_window(16),
                                               return_complex=True).abs())(x)
    return out.detach().numpy()


@pytest.mark.parametrize("transform", ["stft", "vmap", "vmap_grad"])
def test_per_example_spectral_loss_under_vmap(transform):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # fallback warnings: see the report
        ours, theirs = _run(ember, transform), _run(torch, transform)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["transpose_", "squeeze_", "unsqueeze_", "t_", "swapdims_"])
def test_inplace_view_op_shape_inside_vmap(op):
    def probe(lib):
        seen = []

        def f(v):
            s = v * 2                           # a fresh batched result
            if op == "squeeze_":
                s = s.unsqueeze(0) * 1
                s.squeeze_(0)
            elif op == "unsqueeze_":
                s.unsqueeze_(1)
            elif op == "t_":
                s.t_()
            else:
                getattr(s, op)(0, 1)
            seen.append((tuple(s.shape), s.stride(), s.is_contiguous()))
            return s.sum(-1)

        out = lib.func.vmap(f)(lib.arange(24.).reshape(2, 3, 4))
        return seen, out.numpy()

    (seen, out), (seen_t, out_t) = probe(ember), probe(torch)
    assert seen == seen_t
    np.testing.assert_array_equal(out, out_t)


@pytest.mark.parametrize("dim", [-2, (0, -2), [2, -2], (-1, -2), 1])
def test_empty_dim_messages_name_the_dim_as_given(dim):
    def messages(lib):
        x = lib.zeros(2, 0, 3)
        out = []
        for f in (lambda: x.amax(dim), lambda: x.amin(dim),
                  lambda: lib.linalg.vector_norm(x, float("inf"), dim=dim),
                  lambda: lib.linalg.vector_norm(x, -1, dim=dim),
                  lambda: x.norm(float("inf"), dim=dim)):
            with pytest.raises((IndexError, RuntimeError)) as info:
                f()
            out.append((info.type.__name__, str(info.value)))
        return out

    assert messages(ember) == messages(torch)


def test_is_contiguous_inside_vmap():
    def probe(lib):
        out = []

        def f(v):
            out.extend([v.is_contiguous(), (v * 2).is_contiguous(), v.t().is_contiguous(),
                        v[:, :2].is_contiguous(), v.t().contiguous().is_contiguous(),
                        v[:, :1].is_contiguous(), v[:0].is_contiguous()])
            for fmt in (lib.channels_last, lib.preserve_format):
                for call in (lambda: v.is_contiguous(memory_format=fmt),
                             lambda: v.contiguous(memory_format=fmt)):
                    with pytest.raises(RuntimeError) as info:
                        call()
                    out.append(str(info.value))
            return v

        lib.func.vmap(f)(lib.arange(24.).reshape(2, 3, 4))
        lib.func.vmap(f, in_dims=1)(lib.arange(24.).reshape(3, 2, 4))
        return out

    assert probe(ember) == probe(torch)


def _fallback_warnings(lib, case):
    import re
    import warnings
    x = lib.from_numpy(np.random.default_rng(0).standard_normal((3, 2, 64)).astype(np.float32))
    w = lib.hann_window(16)

    def st(v):
        return lib.stft(v, 16, 4, window=w, return_complex=True)

    def ist(s):
        return lib.istft(s, 16, 4, window=w, length=64)

    vmap, grad = lib.func.vmap, lib.func.grad
    run = {
        "stft": lambda: vmap(st)(x[:, 0]),
        "nested": lambda: vmap(vmap(st), in_dims=1)(x),
        "window": lambda: vmap(lambda ww: lib.stft(x[0, 0], 16, 4, window=ww,
                                                   return_complex=True))(w.expand(2, 16)),
        "roundtrip": lambda: vmap(lambda v: ist(st(v)))(x[:, 0]),
        "grad_inside": lambda: vmap(grad(lambda v: ist(st(v)).pow(2).sum()))(x[:, 0]),
        "jacrev": lambda: lib.func.jacrev(lambda v: st(v).abs().sum(0))(x[0, 0]),
        "pad_grads": lambda: vmap(grad(lambda v: lib.nn.functional.pad(
            v, (3, 2), mode="reflect").pow(2).sum()))(x),
        "empty": lambda: vmap(st)(x[:0, 0]),
        "mask_fill": lambda: vmap(lambda v: v.reshape(8, 8).transpose(0, -1).masked_fill(
            (lib.arange(8.) >= 2) & (lib.arange(8.) < 5), v.mean()))(x[:, 0]),
    }[case]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = run().detach().numpy()
        except RuntimeError as e:
            out = str(e)
    return out, [re.sub(r" \(Triggered internally at .*\)$", "", str(m.message))
                 for m in caught]


@pytest.mark.parametrize("case", ["stft", "nested", "window", "roundtrip", "grad_inside",
                                  "jacrev", "pad_grads", "empty", "mask_fill"])
def test_stft_under_vmap_warns_as_torchs_fallback(case):
    (ours, w_ours), (theirs, w_theirs) = _fallback_warnings(ember, case), \
        _fallback_warnings(torch, case)
    assert w_ours == w_theirs
    if isinstance(theirs, str):
        assert ours == theirs
    else:
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)
