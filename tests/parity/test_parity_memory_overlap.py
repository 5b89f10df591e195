"""Writes into shared memory (in place, out=, samplers), resize_ over shared memory and the
layout of results for transposed inputs, against PyTorch."""

import pytest

import ember
from tests.parity._compare import outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

WRITES = {
    "add_ shifted": lambda m: m.arange(6.)[1:4].add_(m.arange(6.)[:3]),
    "shifted self": lambda m: (lambda x: x[1:4].add_(x[:3]))(m.arange(6.)),
    "sub_ row": lambda m: (lambda x: x.sub_(x[1]))(m.arange(6.).view(2, 3)),
    "add_ t": lambda m: (lambda x: x.add_(x.t()))(m.arange(4.).view(2, 2)),
    "copy_ shifted": lambda m: (lambda x: x[1:4].copy_(x[:3]))(m.arange(6.)),
    "same elements": lambda m: (lambda x: x.mul_(x.view(2, 2).view(4)))(m.arange(4.)),
    "out shifted": lambda m: (lambda x: m.mul(x[:3], 2, out=x[1:4]))(m.arange(6.)),
    "out same": lambda m: (lambda x: m.mul(x[:3], 2, out=x[:3]))(m.arange(6.)),
    "out expanded": lambda m: m.neg(m.ones(3), out=m.zeros(1).expand(3)),
    "cat out shifted": lambda m: (lambda x: m.cat([x[:2], x[2:4]], out=x[1:5]))(m.arange(6.)),
    "uniform_ expanded": lambda m: m.zeros(1).expand(3).uniform_(),
    "normal_ expanded": lambda m: m.zeros(1).expand(3).normal_(),
    # ops that write out of order refuse any aliasing, even of the same elements
    "scatter_ self": lambda m: (lambda x: x.scatter_(0, _index(m), x))(_square(m)),
    "scatter_add_ self": lambda m: (lambda x: x.scatter_add_(0, _index(m), x))(_square(m)),
    "scatter_add_ row": lambda m: (lambda x: x[:2].scatter_add_(0, _index(m)[:2], x[1:]))(
        _square(m)),
    "scatter_reduce_ self": lambda m: (lambda x: x.scatter_reduce_(0, _index(m), x, "sum"))(
        _square(m)),
    "index_copy_ self": lambda m: (lambda x: x.index_copy_(0, m.tensor([2, 1, 0]), x))(
        _square(m)),
    "index_add_ clone": lambda m: (lambda x: x.index_add_(0, m.tensor([2, 1, 0]), x.clone()))(
        _square(m)),
    "gather out self": lambda m: (lambda x: m.gather(x, 0, _index(m), out=x))(_square(m)),
    "index_select out self": lambda m: (
        lambda x: m.index_select(x, 0, m.tensor([2, 1, 0]), out=x))(_square(m)),
    "take out self": lambda m: (lambda x: m.take(x, _index(m), out=x))(_square(m)),
    "scatter_ fresh": lambda m: (lambda x: x.scatter_(0, m.tensor([0, 1, 0]), x))(m.arange(3.)),
    "gather out fresh": lambda m: (lambda x: m.gather(x, 0, m.tensor([0, 1, 0]), out=x))(
        m.arange(3.)),
}


def _square(m):
    return m.arange(9.).reshape(3, 3)


def _index(m):
    return m.tensor([[0, 1, 2], [1, 2, 0], [2, 0, 1]])


def _outcome(fn, module):
    """The values ``fn(module)`` leaves, or its RuntimeError's type and message."""
    return outcome(fn, module, catch=RuntimeError, describe=lambda r: r.tolist())


@pytest.mark.parametrize("name", sorted(WRITES))
def test_overlapping_writes_match_pytorch(name):
    assert _outcome(WRITES[name], ember) == _outcome(WRITES[name], torch)


RESIZES = {
    "same shape": lambda t: t.view(2, 3).t().resize_(3, 2),
    "transposed to 1-d": lambda t: t.view(2, 3).t().resize_(6),
    "row": lambda t: t.view(2, 3)[1].resize_(1, 3),
    "offset shrink": lambda t: t.view(2, 3)[:, 1:].resize_(5),
}


@pytest.mark.parametrize("name", sorted(RESIZES))
def test_resize_matches_pytorch(name):
    got = RESIZES[name](ember.arange(6.))
    want = RESIZES[name](torch.arange(6.))
    assert (got.tolist(), got.stride(), got.storage_offset()) == \
        (want.tolist(), want.stride(), want.storage_offset())


LAYOUT = {
    "masked_fill": lambda m, t: t.masked_fill(t > 1, 0.0),
    "cumsum": lambda m, t: t.cumsum(0),
    "softmax": lambda m, t: t.softmax(-1),
    "gather": lambda m, t: t.gather(0, m.zeros_like(t, dtype=m.long)),
    "repeat": lambda m, t: t.repeat(1, 1),
    "cat": lambda m, t: m.cat([t, t]),
    "stack": lambda m, t: m.stack([t, t]),
    "layer_norm": lambda m, t: m.nn.functional.layer_norm(t, t.shape[-1:]),
    "exp": lambda m, t: t.exp(),
}


@pytest.mark.parametrize("name", sorted(LAYOUT))
def test_result_strides_of_transposed_inputs_match_pytorch(name):
    got = LAYOUT[name](ember, ember.arange(24.).reshape(4, 6).t() / 10)
    want = LAYOUT[name](torch, torch.arange(24.).reshape(4, 6).t() / 10)
    assert got.stride() == want.stride()
    assert got.reshape(-1).tolist() == pytest.approx(want.reshape(-1).tolist())
