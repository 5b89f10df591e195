"""F.embedding (padding_idx, max_norm, scale_grad_by_freq), F.embedding_bag, and the
Embedding and EmbeddingBag modules."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from ember.autograd import gradcheck

D = ember.float64


def test_embedding_gradient_sums_rows_and_skips_padding():
    w = ember.randn(5, 3, dtype=D, requires_grad=True)
    idx = ember.tensor([[1, 2], [4, 1]])
    g = ember.randn(2, 2, 3, dtype=D)
    F.embedding(idx, w, padding_idx=-1).backward(g)     # -1: the last row
    want = np.zeros((5, 3))
    np.add.at(want, idx.numpy().reshape(-1), g.numpy().reshape(-1, 3))
    want[4] = 0
    np.testing.assert_allclose(w.grad.numpy(), want)


def test_embedding_scale_grad_by_freq():
    w = ember.randn(4, 2, dtype=D, requires_grad=True)
    F.embedding(ember.tensor([1, 1, 1, 3]), w, scale_grad_by_freq=True).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [[0, 0], [1, 1], [0, 0], [1, 1]])


def test_embedding_backward_many_positions():
    """The sparse-product path of the backward (many positions) sums like np.add.at."""
    w = ember.randn(7, 3, dtype=D, requires_grad=True)
    idx = ember.randint(0, 7, (40, 20))
    g = ember.randn(40, 20, 3, dtype=D)
    F.embedding(idx, w).backward(g)
    want = np.zeros((7, 3))
    np.add.at(want, idx.numpy().reshape(-1), g.numpy().reshape(-1, 3))
    np.testing.assert_allclose(w.grad.numpy(), want, atol=1e-12)


def test_embedding_max_norm_renormalizes_rows_in_place():
    w = ember.randn(4, 3) * 10
    before = w.clone()
    y = F.embedding(ember.tensor([1, 2, 1]), w, max_norm=1.0)
    norms = w.norm(dim=1).numpy()
    np.testing.assert_allclose(norms[[1, 2]], 1, atol=1e-5)
    np.testing.assert_allclose(w[[0, 3]].numpy(), before[[0, 3]].numpy())
    np.testing.assert_allclose(y.numpy(), w[[1, 2, 1]].numpy())


def test_embedding_errors():
    w = ember.randn(4, 3)
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        F.embedding(ember.tensor([1]), w, padding_idx=4)
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        F.embedding(ember.tensor([1]), w, padding_idx=-5)
    with pytest.raises(IndexError, match="index out of range in self"):
        F.embedding(ember.tensor([4]), w)


def test_embedding_module():
    ember.manual_seed(0)
    m = nn.Embedding(1000, 20, padding_idx=1)
    assert repr(m) == "Embedding(1000, 20, padding_idx=1)"
    w = m.weight.detach().numpy()
    assert np.all(w[1] == 0)
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1) < 0.02         # N(0, 1)
    m = nn.Embedding(5, 3, padding_idx=1, max_norm=2.0, norm_type=3.0,
                     scale_grad_by_freq=True, sparse=True)
    assert repr(m) == ("Embedding(5, 3, padding_idx=1, max_norm=2.0, norm_type=3.0, "
                       "scale_grad_by_freq=True, sparse=True)")
    assert nn.Embedding(5, 3, padding_idx=-1).padding_idx == 4
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(5, 3, padding_idx=6)


def test_embedding_from_pretrained():
    table = ember.randn(5, 3)
    m = nn.Embedding.from_pretrained(table)
    assert not m.weight.requires_grad
    np.testing.assert_allclose(m(ember.tensor([2, 0])).numpy(), table.numpy()[[2, 0]])
    assert nn.Embedding.from_pretrained(table, freeze=False).weight.requires_grad
    with pytest.raises(AssertionError, match="Embeddings parameter is expected to be "
                                             "2-dimensional"):
        nn.Embedding.from_pretrained(ember.randn(5))


def _bag_ref(idx, w, offsets, mode, psw=None, pad=None):
    bounds = list(offsets) + [len(idx)]
    out = np.zeros((len(offsets), w.shape[1]))
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        rows = [w[j] * (1 if psw is None else psw[k])
                for k, j in zip(range(lo, hi), idx[lo:hi]) if j != pad]
        if rows:
            out[i] = {"sum": np.sum, "mean": np.mean, "max": np.max}[mode](rows, axis=0)
    return out


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_matches_reference(mode):
    w = ember.randn(6, 3, dtype=D, requires_grad=True)
    idx, offsets = ember.tensor([1, 2, 3, 5, 2, 0]), ember.tensor([0, 0, 2, 5])
    for pad in (None, 2):
        y = F.embedding_bag(idx, w, offsets, mode=mode, padding_idx=pad)
        np.testing.assert_allclose(y.detach().numpy(), _bag_ref(
            idx.numpy(), w.detach().numpy(), offsets.numpy(), mode, pad=pad))
    assert gradcheck(lambda w: F.embedding_bag(idx, w, offsets, mode=mode), (w,))


def test_embedding_bag_2d_input_weights_and_last_offset():
    w = ember.randn(6, 3, dtype=D, requires_grad=True)
    psw = ember.rand(6, dtype=D, requires_grad=True)
    idx = ember.tensor([[1, 2, 3], [5, 2, 0]])
    y = F.embedding_bag(idx, w, mode="sum", per_sample_weights=psw.reshape(2, 3))
    np.testing.assert_allclose(y.detach().numpy(), _bag_ref(
        idx.numpy().reshape(-1), w.detach().numpy(), [0, 3], "sum", psw.detach().numpy()))
    assert gradcheck(lambda w, p: F.embedding_bag(idx.reshape(-1), w, ember.tensor([0, 2]),
                                                  mode="sum", per_sample_weights=p), (w, psw))
    y = F.embedding_bag(ember.tensor([1, 2, 3]), w, ember.tensor([0, 0, 2, 3]),
                        include_last_offset=True)
    assert y.shape == (3, 3)
    np.testing.assert_allclose(y[1].detach().numpy(), w[[1, 2]].mean(0).detach().numpy())


def test_embedding_bag_errors():
    w = ember.randn(4, 3)
    idx = ember.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="offsets\\[0\\] has to be 0"):
        F.embedding_bag(idx, w, ember.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="offsets\\[-1\\] can not be greater than input's "
                                           "length 3 but got offsets\\[-1\\] of 4"):
        F.embedding_bag(idx, w, ember.tensor([0, 4]))
    with pytest.raises(ValueError, match="offsets has to be a 1D Tensor but got None"):
        F.embedding_bag(idx, w)
    with pytest.raises(ValueError, match="mode has to be one of sum, mean or max"):
        F.embedding_bag(idx, w, ember.tensor([0]), mode="foo")
    with pytest.raises(NotImplementedError, match="per_sample_weights is only supported for "
                                                  "mode='sum' \\(got mode='max'\\)"):
        F.embedding_bag(idx, w, ember.tensor([0]), mode="max", per_sample_weights=ember.ones(3))
    with pytest.raises(ValueError, match="if input is 2D, then offsets has to be None"):
        F.embedding_bag(idx.reshape(1, 3), w, ember.tensor([0]))


def test_embedding_bag_out_of_range_index_names_its_position():
    w = ember.randn(10, 3)
    with pytest.raises(RuntimeError, match="^Index 1 of input takes value 12 which is not in "
                                           "the valid range \\[0, 10\\)$"):
        F.embedding_bag(ember.tensor([[1, 12, 12]]), w, mode="sum")
    with pytest.raises(RuntimeError, match="^embedding_bag: Expected idx >= 0 && idx < "
                                           "num_embeddings but found idx to be -1$"):
        F.embedding_bag(ember.tensor([3, -1]), w, ember.tensor([0]), mode="max")


def test_embedding_bag_sparse_gradient():
    # one gradient row per position (weighted, divided by the bag size for mean), padding out
    for mode, psw, values in [("sum", [2., 3., 1., 1., 5.], [[2, 4], [3, 6], [3, 4], [15, 20]]),
                              ("mean", None, [[.5, 1], [.5, 1], [1.5, 2], [1.5, 2]])]:
        bag = nn.EmbeddingBag(5, 2, mode=mode, sparse=True, padding_idx=0)
        psw = None if psw is None else ember.tensor(psw)
        out = bag(ember.tensor([1, 3, 0, 1, 4]), ember.tensor([0, 3]), per_sample_weights=psw)
        (out * ember.tensor([[1., 2.], [3., 4.]])).sum().backward()
        grad = bag.weight.grad
        assert grad.is_sparse and not grad.is_coalesced()
        assert grad._indices().tolist() == [[1, 3, 1, 4]]
        assert grad._values().tolist() == values


def test_embedding_bag_max_mode_limits():
    w, idx, off = ember.randn(4, 3), ember.tensor([1, 2]), ember.tensor([0])
    with pytest.raises(ValueError, match="^max mode does not support sparse weights$"):
        F.embedding_bag(idx, w, off, mode="max", sparse=True)
    with pytest.raises(ValueError, match="^max mode does not support scaling the gradient by "
                                         "the frequency$"):
        F.embedding_bag(idx, w, off, mode="max", scale_grad_by_freq=True)
    with pytest.raises(ValueError, match="^offsets has to be a 1D Tensor$"):
        F.embedding_bag(idx, w, off.reshape(1, 1), mode="max", sparse=True)


def test_embedding_bag_module():
    assert repr(nn.EmbeddingBag(5, 3)) == "EmbeddingBag(5, 3, mode='mean')"
    m = nn.EmbeddingBag(5, 3, mode="sum", padding_idx=0, max_norm=1.0)
    assert repr(m) == "EmbeddingBag(5, 3, max_norm=1.0, mode='sum', padding_idx=0)"
    assert np.all(m.weight.detach().numpy()[0] == 0)
    table = ember.randn(5, 3)
    bag = nn.EmbeddingBag.from_pretrained(table, mode="max")
    assert not bag.weight.requires_grad
    np.testing.assert_allclose(bag(ember.tensor([[1, 2]])).numpy(),
                               table.numpy()[[1, 2]].max(0, keepdims=True))


def test_embedding_bag_max_ties_pick_the_first_row():
    # PyTorch scans each bag in order and keeps a value only when strictly greater: on a tie
    # the earlier position gives the value and takes the whole gradient (not a share)
    w = ember.tensor([[1., 5., 2.], [1., 3., 2.], [0., 5., 2.], [1., 5., 7.]], dtype=D,
                     requires_grad=True)
    y = F.embedding_bag(ember.tensor([2, 1, 0, 0, 3, 2, 1]), w, ember.tensor([0, 3, 3]),
                        mode="max")
    np.testing.assert_array_equal(y.detach().numpy(), [[1, 5, 2], [0, 0, 0], [1, 5, 7]])
    y.backward(ember.tensor([[1., 2., 3.], [4., 5., 6.], [7., 8., 9.]], dtype=D))
    np.testing.assert_array_equal(w.grad.numpy(), [[7, 8, 0], [1, 0, 0], [0, 2, 3],
                                                   [0, 0, 9]])


def test_embedding_bag_max_nan_and_signed_zero():
    nan = float("nan")
    w = ember.tensor([[1., nan], [2., 0.], [nan, 3.], [-0., -0.]], requires_grad=True)
    # a NaN first stays (nothing is greater); a later NaN is passed over
    y = F.embedding_bag(ember.tensor([0, 1, 2, 2, 1, 0]), w, ember.tensor([0, 3]), mode="max")
    np.testing.assert_array_equal(y.detach().numpy(), [[2, nan], [nan, 3]])
    y.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[0, 1], [1, 0], [1, 1], [0, 0]])
    y = F.embedding_bag(ember.tensor([[3, 1], [1, 3]]), w, mode="max")
    assert np.signbit(y.detach().numpy()[:, 1]).tolist() == [True, False]


def test_embedding_bag_weight_dtype():
    with pytest.raises(RuntimeError, match=r"'weight' to have one of the following scalar "
                                           r"types: Half, BFloat16, Float, Double; but got "
                                           r"ember.LongTensor instead"):
        F.embedding_bag(ember.tensor([0, 1]), ember.ones(2, 2, dtype=ember.int64),
                        ember.tensor([0]), mode="max")
    y = F.embedding_bag(ember.tensor([0, 1]), ember.tensor([[1., 4.], [3., 2.]]).bfloat16(),
                        ember.tensor([0]), mode="max")
    assert y.dtype is ember.bfloat16 and y.float().tolist() == [[3., 4.]]


def test_embedding_bag_per_sample_weights_must_have_the_weight_dtype():
    idx, off = ember.tensor([0, 2, 1, 3]), ember.tensor([0, 2])
    w = ember.arange(12.).reshape(4, 3)
    with pytest.raises(RuntimeError, match=r"Expected tensor for argument #1 'weight' to have the "
                                           r"same type as tensor for argument #1 "
                                           r"'per_sample_weights'; but type ember.FloatTensor "
                                           r"does not equal ember.DoubleTensor \(while checking "
                                           r"arguments for embedding_bag\)"):
        F.embedding_bag(idx, w, off, mode="sum", per_sample_weights=ember.ones(4).double())
    with pytest.raises(RuntimeError, match="ember.DoubleTensor does not equal ember.LongTensor"):
        F.embedding_bag(idx, w.double(), off, mode="sum", per_sample_weights=ember.ones(4).long())
    y = F.embedding_bag(idx, w.double(), off, mode="sum",
                        per_sample_weights=ember.tensor([1., .5, 2., 1.]).double())
    assert y.dtype is ember.float64 and y.tolist() == [[3., 4.5, 6.], [15., 18., 21.]]


def test_embedding_bag_padding_idx_out_of_range_errors():
    # the module asserts in lower case; the functional form raises PyTorch's RuntimeError
    with pytest.raises(AssertionError, match="^padding_idx must be within num_embeddings$"):
        nn.EmbeddingBag(10, 3, padding_idx=10)
    with pytest.raises(AssertionError, match="^padding_idx must be within num_embeddings$"):
        nn.EmbeddingBag(10, 3, padding_idx=-11)
    assert nn.EmbeddingBag(10, 3, padding_idx=-1).padding_idx == 9
    w = ember.ones(10, 3)
    with pytest.raises(RuntimeError, match=r"^padding_idx must be within the number of "
                                           r"embeddings, -10 through 9, but got 10$"):
        F.embedding_bag(ember.tensor([[1]]), w, padding_idx=10)
    with pytest.raises(RuntimeError, match="-10 through 9, but got -11"):
        F.embedding_bag(ember.tensor([[1]]), w, padding_idx=-11)


def test_complex_weight_requiring_grad_is_refused_as_torch():
    w = ember.complex(ember.arange(6.).view(3, 2), ember.ones(3, 2))
    with pytest.raises(RuntimeError, match=r"^embedding does not support automatic "
                                           r"differentiation for outputs with complex dtype\.$"):
        F.embedding(ember.tensor([2, 0]), w.requires_grad_())
    with ember.no_grad():                   # nothing recorded: the lookup itself is fine
        out = F.embedding(ember.tensor([2, 0]), w)
    np.testing.assert_array_equal(out.numpy(), w.detach().numpy()[[2, 0]])
    fw = ember.autograd.forward_ad
    with fw.dual_level():                   # a forward-mode tangent passes
        dual = fw.make_dual(w.detach(), w.detach() * 2)
        tangent = fw.unpack_dual(F.embedding(ember.tensor([1]), dual)).tangent
    np.testing.assert_array_equal(tangent.numpy(), 2 * w.detach().numpy()[[1]])
