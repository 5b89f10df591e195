"""Accumulating kernels agree with PyTorch's CPU kernels to the bit: float32 sums with repeated
indices (PyTorch adds them one after another in index order), integer wrap-around, histc's
counts, and the gradients that scatter-add (advanced indexing, index_select, gather,
embedding)."""

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _e(t):
    return ember.tensor(t.numpy())


def _same(a, b):
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes()


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(35)


@pytest.mark.parametrize("shape,m", [((16,), 32), ((50, 8), 300), ((7, 5, 40), 200)])
def test_index_put_accumulate(gen, shape, m):
    x = torch.randn(shape, generator=gen)
    idx = torch.randint(-shape[0], shape[0], (m,), generator=gen)
    src = torch.randn((m,) + shape[1:], generator=gen) * 1e4
    _same(x.clone().index_put_((idx,), src, accumulate=True),
          _e(x).index_put_((_e(idx),), _e(src), accumulate=True))
    if len(shape) > 1:                  # two index arrays, the rest sliced
        idx2 = torch.randint(0, shape[1], (m,), generator=gen)
        src2 = torch.randn((m,) + shape[2:], generator=gen) * 1e4
        _same(x.clone().index_put_((idx, idx2), src2, accumulate=True),
              _e(x).index_put_((_e(idx), _e(idx2)), _e(src2), accumulate=True))


@pytest.mark.parametrize("dim", [0, 1])
def test_index_add_float32(gen, dim):
    x = torch.randn(30, 40, generator=gen)
    n = x.shape[dim]
    idx = torch.randint(0, n, (500,), generator=gen)
    src = torch.randn((500, 40) if dim == 0 else (30, 500), generator=gen) * 1e3
    _same(x.clone().index_add_(dim, idx, src, alpha=0.5),
          _e(x).index_add_(dim, _e(idx), _e(src), alpha=0.5))


def test_scatter_add_float32(gen):
    x = torch.randn(20, 30, generator=gen)
    idx = torch.randint(0, 20, (400, 30), generator=gen)
    src = torch.randn(400, 30, generator=gen) * 1e3
    _same(x.clone().scatter_add_(0, idx, src), _e(x).scatter_add_(0, _e(idx), _e(src)))


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16])
def test_integer_wrap(dtype):
    x = torch.full((4, 300), 100, dtype=dtype)
    idx = torch.tensor([0, 0, 1, -1] * 5)
    src = torch.full((20, 300), 77, dtype=dtype)
    _same(x.clone().index_put_((idx,), src, accumulate=True),
          _e(x).index_put_((_e(idx),), _e(src), accumulate=True))
    _same(x.clone().index_add_(0, idx % 4, src), _e(x).index_add_(0, _e(idx % 4), _e(src)))


def test_histc(gen):
    x = torch.randn(10000, generator=gen)
    for bins, lo, hi in ((100, 0, 0), (7, -1, 2), (1000, -3, 3)):
        _same(torch.histc(x, bins, lo, hi), ember.histc(_e(x), bins, lo, hi))
    _same(torch.histogram(x, 50).hist, ember.histogram(_e(x), 50).hist)


def test_gradients_that_scatter(gen):
    w = torch.randn(40, 16, generator=gen, requires_grad=True)
    idx = torch.randint(0, 40, (600,), generator=gen)
    g = torch.randn(600, 16, generator=gen)
    we = ember.tensor(w.detach().numpy(), requires_grad=True)
    for op, eop in ((lambda t, i: t[i], lambda t, i: t[i]),
                    (lambda t, i: t.index_select(0, i), lambda t, i: t.index_select(0, i)),
                    (lambda t, i: torch.nn.functional.embedding(i, t),
                     lambda t, i: ember.nn.functional.embedding(i, t))):
        w.grad, we.grad = None, None
        op(w, idx).backward(g)
        eop(we, _e(idx)).backward(_e(g))
        _same(w.grad, we.grad)
    w.grad, we.grad = None, None
    idx2 = torch.randint(0, 40, (600, 16), generator=gen)
    w.gather(0, idx2).backward(g)
    we.gather(0, _e(idx2)).backward(_e(g))
    _same(w.grad, we.grad)
