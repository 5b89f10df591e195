"""In-place view ops (transpose_, squeeze_, unsqueeze_, t_) on a batched tensor inside vmap
change its logical shape: before, the value was restrided but the shape the function saw
stayed the old one, so stft (which ends in transpose_ and squeeze_) gave (1, frames, freq)
per example and an istft after it raised. And is_contiguous() inside vmap answers for one
example (it was always False)."""

import numpy as np

import ember


def test_inplace_view_ops_update_the_logical_shape():
    seen = []

    def f(v):
        s = v * 2
        s.transpose_(0, 1)
        seen.append((tuple(s.shape), s.stride()))
        s.unsqueeze_(0)
        seen.append((tuple(s.shape), s.stride()))
        s.squeeze_(0)
        seen.append((tuple(s.shape), s.stride()))
        s.t_()
        seen.append((tuple(s.shape), s.stride()))
        return s.reshape(-1)

    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = ember.func.vmap(f)(ember.from_numpy(x))
    assert seen == [((4, 3), (1, 4)), ((1, 4, 3), (4, 1, 4)), ((4, 3), (1, 4)),
                    ((3, 4), (4, 1))]
    np.testing.assert_array_equal(out.numpy(), (x * 2).reshape(2, -1))


def test_stft_then_istft_per_example():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    window = ember.hann_window(16)

    def roundtrip(v):
        spec = ember.stft(v, 16, 4, window=window, return_complex=True)
        assert tuple(spec.shape) == (9, 17)
        return ember.istft(spec, 16, 4, window=window, length=64)

    out = ember.func.vmap(roundtrip)(ember.from_numpy(x))
    np.testing.assert_allclose(out.numpy(), x, rtol=1e-5, atol=1e-5)


def test_is_contiguous_judges_an_example():
    out = []

    def f(v):
        out.extend([v.is_contiguous(), v.t().is_contiguous(), v[:, :2].is_contiguous(),
                    v.t().contiguous().is_contiguous(), v[:, :1].is_contiguous()])
        return v

    ember.func.vmap(f)(ember.arange(24.).reshape(2, 3, 4))
    ember.func.vmap(f, in_dims=1)(ember.arange(24.).reshape(3, 2, 4))   # batch dim inside
    assert out == [True, False, False, True, False, False, False, False, True, False]
