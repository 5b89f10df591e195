"""SDPA's and linear's backward node names (PyTorch's CPU kernel choice), MHA's weights node,
and constructor errors of RNN and EmbeddingBag, against PyTorch."""

import pytest

import ember
from tests.parity._compare import error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

SDPA_SHAPES = [
    ((2, 4, 3, 8), (2, 4, 5, 8), (2, 4, 5, 8), {}),
    ((2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8), {"enable_gqa": True}),
    ((2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 6), {"enable_gqa": True}),
    ((2, 4, 3, 8), (2, 4, 5, 8), (2, 4, 5, 6), {}),
    ((2, 4, 3, 8), (1, 4, 5, 8), (1, 4, 5, 8), {}),
    ((2, 4, 3, 8), (2, 1, 5, 8), (2, 1, 5, 8), {}),
    ((4, 3, 8), (4, 5, 8), (4, 5, 8), {}),
    ((2, 4, 0, 8), (2, 4, 5, 8), (2, 4, 5, 8), {}),
    ((2, 4, 3, 8), (2, 4, 0, 8), (2, 4, 0, 8), {}),
    ((0, 4, 3, 8), (0, 4, 5, 8), (0, 4, 5, 8), {}),
    ((2, 4, 3, 0), (2, 4, 5, 0), (2, 4, 5, 8), {}),
    ((2, 4, 3, 8), (2, 4, 5, 8), (2, 4, 5, 0), {}),
]


@pytest.mark.parametrize("q,k,v,kw", SDPA_SHAPES)
def test_sdpa_node_name(q, k, v, kw):
    def name(lib):
        args = [lib.ones(*s, requires_grad=True) for s in (q, k, v)]
        return lib.nn.functional.scaled_dot_product_attention(*args, **kw).grad_fn.name()
    assert name(ember) == name(torch)


@pytest.mark.parametrize("make", [
    lambda lib: lib.ones(2, 5, 3), lambda lib: lib.ones(5, 2, 3).transpose(0, 1),
    lambda lib: lib.ones(1, 5, 3).expand(2, 5, 3), lambda lib: lib.ones(2, 5, 2, 3).transpose(1, 2),
    lambda lib: lib.ones(3)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_node_name(make, bias):
    def name(lib):
        w = lib.ones(4, 3, requires_grad=True)
        b = lib.ones(4) if bias else None
        return lib.nn.functional.linear(make(lib), w, b).grad_fn.name()
    assert name(ember) == name(torch)


@pytest.mark.parametrize("average", [True, False])
@pytest.mark.parametrize("batch_first", [True, False])
def test_mha_node_names(average, batch_first):
    def names(lib):
        m = lib.nn.MultiheadAttention(4, 2, batch_first=batch_first)
        x = lib.ones(2, 3, 4)
        out, w = m(x, x, x, average_attn_weights=average)
        return out.grad_fn.name(), w.grad_fn.name()
    assert names(ember) == names(torch)


@pytest.mark.parametrize("kwargs", [{"bias": 0}, {"batch_first": 1}, {"input_size": 4.0},
                                    {"input_size": 0}, {"hidden_size": 5.0}])
@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_rnn_constructor_errors(cls, kwargs):
    args = {"input_size": 4, "hidden_size": 5, **kwargs}
    assert error(lambda: getattr(ember.nn, cls)(**args)) == \
        error(lambda: getattr(torch.nn, cls)(**args))


@pytest.mark.parametrize("padding_idx", [10, -11])
def test_embedding_bag_padding_idx_errors(padding_idx):
    assert error(lambda: ember.nn.EmbeddingBag(10, 3, padding_idx=padding_idx)) == \
        error(lambda: torch.nn.EmbeddingBag(10, 3, padding_idx=padding_idx))
    got = error(lambda: ember.nn.functional.embedding_bag(ember.tensor([[1]]), ember.ones(10, 3),
                                                            padding_idx=padding_idx))
    want = error(lambda: torch.nn.functional.embedding_bag(torch.tensor([[1]]), torch.ones(10, 3),
                                                             padding_idx=padding_idx))
    assert got == want
