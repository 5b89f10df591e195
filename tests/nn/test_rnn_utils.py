"""ember.nn.utils.rnn: packing, padding, and recurrent layers on packed sequences."""

import numpy as np
import pytest

import ember
from ember import nn
from ember.nn.utils import rnn as R


def _a(t):
    return np.asarray(t.detach())


def test_pack_padded_sequence_layout():
    x = ember.arange(12.).reshape(4, 3, 1)          # (T, B, 1): value = 3 t + b
    p = R.pack_padded_sequence(x, [4, 2, 1])
    assert isinstance(p, tuple) and p._fields == ("data", "batch_sizes", "sorted_indices",
                                                  "unsorted_indices")
    assert _a(p.data).ravel().tolist() == [0, 1, 2, 3, 4, 6, 9]
    assert p.batch_sizes.tolist() == [3, 2, 1, 1] and p.batch_sizes.dtype is ember.int64
    assert p.sorted_indices is None and p.unsorted_indices is None


def test_pack_unsorted_and_pad_back():
    x = ember.randn(3, 5, 2)                        # batch_first (B, T, *)
    lengths = [2, 5, 3]
    p = R.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    assert p.sorted_indices.tolist() == [1, 2, 0]
    assert p.unsorted_indices.tolist() == [2, 0, 1]
    assert p.batch_sizes.tolist() == [3, 3, 2, 1, 1]
    padded, out_lengths = R.pad_packed_sequence(p, batch_first=True, padding_value=-1.,
                                                total_length=6)
    assert out_lengths.tolist() == lengths
    assert padded.shape == (3, 6, 2)
    for j, n in enumerate(lengths):
        np.testing.assert_array_equal(_a(padded)[j, :n], _a(x)[j, :n])
        assert (_a(padded)[j, n:] == -1).all()


def test_pad_sequence_sides_and_batch_first():
    a, b = ember.ones(2), ember.full((3,), 2.)
    assert _a(R.pad_sequence([a, b])).tolist() == [[1, 2], [1, 2], [0, 2]]
    assert _a(R.pad_sequence([a, b], batch_first=True, padding_value=7.,
                             padding_side="left")).tolist() == [[7, 1, 1], [2, 2, 2]]
    with pytest.raises(RuntimeError, match="Expected padding_side to be one of left or right, "
                                           "but got foo."):
        R.pad_sequence([a, b], padding_side="foo")
    with pytest.raises(RuntimeError, match="received an empty list of sequences"):
        R.pad_sequence([])


def test_pad_sequence_copies_into_the_first_sequences_layout_as_pytorch():
    a = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    out = R.pad_sequence([a, ember.tensor([4])], padding_side="left", padding_value=-1)
    assert out.tolist() == [[1.0, -1.0], [2.0, -1.0], [3.0, 4.0]] and out.is_contiguous()
    assert out.dtype is ember.float32 and type(out.grad_fn).__name__ == "CopySlices"
    (out * ember.arange(6.0).reshape(3, 2)).sum().backward()
    assert a.grad.tolist() == [0.0, 2.0, 4.0]
    ints = R.pad_sequence([ember.ones(2, dtype=ember.int64), ember.ones(1)])
    assert ints.dtype is ember.int64                    # the first sequence's dtype
    wide = R.pad_sequence([ember.ones(2, 3), ember.ones(1, 1)], batch_first=True)
    assert wide.shape == (2, 2, 3) and float(wide.sum()) == 9.0     # broadcast as copy_
    with pytest.raises(RuntimeError, match=r"^The size of tensor a \(3\) must match the size "
                                           r"of tensor b \(4\) at non-singleton dimension 1$"):
        R.pad_sequence([ember.ones(2, 3), ember.ones(2, 4)])


def test_pack_and_unpack_sequence_roundtrip():
    seqs = [ember.randn(3, 2), ember.randn(1, 2), ember.randn(4, 2)]
    p = R.pack_sequence(seqs, enforce_sorted=False)
    back = R.unpack_sequence(p)
    assert [tuple(s.shape) for s in back] == [(3, 2), (1, 2), (4, 2)]
    for s, t in zip(seqs, back):
        np.testing.assert_array_equal(_a(s), _a(t))
    padded = R.pad_sequence(seqs)
    parts = R.unpad_sequence(padded, ember.tensor([3, 1, 4]))
    for s, t in zip(seqs, parts):
        np.testing.assert_array_equal(_a(s), _a(t))


def test_packing_errors():
    x = ember.randn(4, 3, 2)
    with pytest.raises(RuntimeError, match="`lengths` array must be sorted in decreasing order "
                                           "when `enforce_sorted` is True"):
        R.pack_padded_sequence(x, [2, 3, 1])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        R.pack_padded_sequence(x, [4, 3, 0])
    with pytest.raises(RuntimeError, match=r"Expected `len\(lengths\)` to be equal to "
                                           r"batch_size, but got 2 \(batch_size=3\)"):
        R.pack_padded_sequence(x, [4, 3])
    with pytest.raises(ValueError, match="Expected total_length to be at least the length of "
                                         "the longest sequence in input, but got "
                                         "total_length=2 and max sequence length being 4"):
        R.pad_packed_sequence(R.pack_padded_sequence(x, [4, 3, 1]), total_length=2)


def test_gradient_flows_through_pack_and_pad():
    x = ember.randn(4, 2, 3, dtype=ember.float64, requires_grad=True)
    lengths = [2, 4]

    def f(x):
        p = R.pack_padded_sequence(x, lengths, enforce_sorted=False)
        return R.pad_packed_sequence(p)[0]
    assert ember.autograd.gradcheck(f, [x])
    f(x).sum().backward()
    g = _a(x.grad)
    assert (g[:2, 0] == 1).all() and (g[2:, 0] == 0).all() and (g[:, 1] == 1).all()


def test_packed_sequence_methods():
    p = R.pack_sequence([ember.randn(2, 3), ember.randn(1, 3)])
    assert p.double().data.dtype is ember.float64
    assert p.to(ember.float32) is p
    assert not p.is_cuda and not p.is_pinned()
    assert p.short().data.dtype is ember.int16 and p.char().data.dtype is ember.int8
    assert p.byte().data.dtype is ember.uint8
    q = R.PackedSequence(p.data, p.batch_sizes, ember.tensor([1, 0]))
    assert q.unsorted_indices.tolist() == [1, 0]


@pytest.mark.parametrize("name,kw", [("LSTM", {"num_layers": 2, "bidirectional": True}),
                                     ("LSTM", {"proj_size": 2, "bidirectional": True}),
                                     ("GRU", {"bidirectional": True}),
                                     ("RNN", {"num_layers": 2, "batch_first": True})])
def test_packed_equals_each_sequence_alone(name, kw):
    """Outputs stop at each sequence's end; final states are taken at its own length."""
    ember.manual_seed(0)
    m = getattr(nn, name)(3, 4, dtype=ember.float64, **kw)
    lengths = [3, 5, 1, 4]
    seqs = [ember.randn(n, 3, dtype=ember.float64) for n in lengths]
    dirs = 2 if kw.get("bidirectional") else 1
    layers = kw.get("num_layers", 1)
    hidden = kw.get("proj_size") or 4
    h0 = ember.randn(layers * dirs, 4, hidden, dtype=ember.float64)
    c0 = ember.randn(layers * dirs, 4, 4, dtype=ember.float64)
    hx = (h0, c0) if name == "LSTM" else h0
    packed = R.pack_sequence(seqs, enforce_sorted=False)
    out, hidden_n = m(packed, hx)
    assert isinstance(out, R.PackedSequence)
    padded, out_lengths = R.pad_packed_sequence(out, batch_first=kw.get("batch_first", False))
    assert out_lengths.tolist() == lengths
    if kw.get("batch_first"):
        padded = padded.transpose(0, 1)
    for j, (s, n) in enumerate(zip(seqs, lengths)):
        one_hx = (h0[:, j], c0[:, j]) if name == "LSTM" else h0[:, j]
        alone, h_alone = m(s, one_hx)           # unbatched (L, I), whatever batch_first
        np.testing.assert_allclose(_a(padded)[:n, j], _a(alone), atol=1e-12)
        assert (_a(padded)[n:, j] == 0).all()
        if name == "LSTM":
            np.testing.assert_allclose(_a(hidden_n[0])[:, j], _a(h_alone[0]), atol=1e-12)
            np.testing.assert_allclose(_a(hidden_n[1])[:, j], _a(h_alone[1]), atol=1e-12)
        else:
            np.testing.assert_allclose(_a(hidden_n)[:, j], _a(h_alone), atol=1e-12)


def test_packed_lstm_gradcheck():
    ember.manual_seed(1)
    m = nn.LSTM(2, 2, bidirectional=True, dtype=ember.float64)
    x = ember.randn(3, 2, 2, dtype=ember.float64, requires_grad=True)

    def f(x):
        p = R.pack_padded_sequence(x, [1, 3], enforce_sorted=False)
        out, (h, c) = m(p)
        return out.data, h, c
    assert ember.autograd.gradcheck(f, [x])


def test_pack_padded_sequence_lengths_must_be_1d():
    padded = ember.zeros(5, 3)
    for lengths, ndim in [(ember.tensor([[3, 2, 1]]), 2), (ember.tensor(3), 0), ([[3, 2, 1]], 2)]:
        with pytest.raises(RuntimeError, match=f"'lengths' argument should be a 1D CPU int64 "
                                               f"tensor, but got {ndim}D cpu Long tensor"):
            R.pack_padded_sequence(padded, lengths)
    assert R.pack_padded_sequence(padded, ember.tensor([3.0, 2.0, 1.0])).batch_sizes.tolist() \
        == [3, 2, 1]


@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_padded_sequence_1d_input_raises_dimension_error(batch_first):
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range "
                                         r"of \[-1, 0\], but got 1\)"):
        R.pack_padded_sequence(ember.arange(3.), [3], batch_first=batch_first)


def test_pack_padded_sequence_batch_first_unsorted_layout():
    x = ember.arange(12.).reshape(3, 4, 1)          # (B, T, 1): value = 4 b + t
    p = R.pack_padded_sequence(x, [2, 4, 1], batch_first=True, enforce_sorted=False)
    assert _a(p.data).ravel().tolist() == [4, 0, 8, 5, 1, 6, 7]
    assert p.batch_sizes.tolist() == [3, 2, 1, 1]
    assert p.sorted_indices.tolist() == [1, 0, 2]


def test_packed_sequence_to_rejects_copy_true():
    p = R.pack_sequence([ember.ones(2), ember.ones(1)])
    with pytest.raises(RuntimeError, match=r"^\.to\(\) does not accept copy argument$"):
        p.to("cpu", copy=True)
    assert p.to(dtype=ember.float32, copy=False).data.tolist() == [1.0, 1.0, 1.0]
