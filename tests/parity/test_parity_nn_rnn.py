"""Recurrent layers against PyTorch: same weights, same outputs, states and gradients."""

import numpy as np
import pytest

import ember
from ember.nn.utils import rnn as ER
from tests.parity._compare import assert_close

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity
TR = torch.nn.utils.rnn


def _copy(em, tm):
    for (n, p), (n2, q) in zip(em.named_parameters(), tm.named_parameters()):
        assert n == n2 and tuple(p.shape) == tuple(q.shape)
        with torch.no_grad():
            q.copy_(torch.from_numpy(np.array(p.detach())))


def _ember(t):
    return ember.tensor(t.detach().numpy()).requires_grad_(t.requires_grad)


def _close(a, b):
    """Assert ember's ``a`` matches torch's ``b`` in shape and values."""
    assert_close(a, b, 1e-4, 1e-5)


def _states(h):
    return h if isinstance(h, tuple) else (h,)


CONFIGS = [("LSTM", {"num_layers": 2, "bidirectional": True, "proj_size": 2}),
           ("LSTM", {"batch_first": True}), ("GRU", {"num_layers": 2, "bidirectional": True}),
           ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
           ("RNN", {"bias": False, "bidirectional": True}), ("LSTM", {"bias": False})]


@pytest.mark.parametrize("case", ["plain", "unbatched", "hx", "packed", "packed_unsorted"])
@pytest.mark.parametrize("name,kw", CONFIGS)
def test_layer_parity(name, kw, case):
    torch.manual_seed(0)
    ember.manual_seed(0)
    em = getattr(ember.nn, name)(3, 4, **kw)
    tm = getattr(torch.nn, name)(3, 4, **kw)
    _copy(em, tm)
    bf = kw.get("batch_first", False)
    tx = torch.randn(*((3, 5, 3) if bf else (5, 3, 3)), requires_grad=True)
    if case == "unbatched":
        tx = torch.randn(5, 3, requires_grad=True)
    ex = _ember(tx)
    targs, eargs = (), ()
    if case == "hx":
        d = (2 if kw.get("bidirectional") else 1) * kw.get("num_layers", 1)
        th = torch.randn(d, 3, kw.get("proj_size", 0) or 4, requires_grad=True)
        if name == "LSTM":
            tc = torch.randn(d, 3, 4, requires_grad=True)
            targs, eargs = ((th, tc),), ((_ember(th), _ember(tc)),)
        else:
            targs, eargs = (th,), (_ember(th),)
    if case.startswith("packed"):
        lengths = [5, 3, 2] if case == "packed" else [2, 5, 3]
        sort = case == "packed"
        to, th_n = tm(TR.pack_padded_sequence(tx, lengths, bf, sort), *targs)
        eo, eh_n = em(ER.pack_padded_sequence(ex, lengths, bf, sort), *eargs)
        to, eo = TR.pad_packed_sequence(to, bf)[0], ER.pad_packed_sequence(eo, bf)[0]
    else:
        to, th_n = tm(tx, *targs)
        eo, eh_n = em(ex, *eargs)
    _close(eo, to)
    for a, b in zip(_states(eh_n), _states(th_n)):
        _close(a, b)
    ((to ** 2).sum() + sum((t * 1.5).sum() for t in _states(th_n))).backward()
    ((eo ** 2).sum() + sum((t * 1.5).sum() for t in _states(eh_n))).backward()
    _close(ex.grad, tx.grad)
    for p, q in zip(em.parameters(), tm.parameters()):
        _close(p.grad, q.grad)
    if case == "hx":
        for a, b in zip(_states(eargs[0]), _states(targs[0])):
            _close(a.grad, b.grad)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cell_parity(name):
    torch.manual_seed(0)
    em, tm = getattr(ember.nn, name)(3, 4), getattr(torch.nn, name)(3, 4)
    _copy(em, tm)
    tx = torch.randn(2, 3, requires_grad=True)
    ex = _ember(tx)
    to, eo = _states(tm(tx)), _states(em(ex))
    for a, b in zip(eo, to):
        _close(a, b)
    sum(t.sum() for t in to).backward()
    sum(t.sum() for t in eo).backward()
    _close(ex.grad, tx.grad)
    for p, q in zip(em.parameters(), tm.parameters()):
        _close(p.grad, q.grad)
    for a, b in zip(_states(em(ex[0])), _states(tm(tx[0]))):
        _close(a, b)


def test_packing_parity():
    torch.manual_seed(0)
    tx = torch.randn(4, 3, 2)
    ex = _ember(tx)
    tp = TR.pack_padded_sequence(tx, [2, 4, 1], enforce_sorted=False)
    ep = ER.pack_padded_sequence(ex, [2, 4, 1], enforce_sorted=False)
    _close(ep.data, tp.data)
    assert ep.batch_sizes.tolist() == tp.batch_sizes.tolist()
    assert ep.sorted_indices.tolist() == tp.sorted_indices.tolist()
    assert ep.unsorted_indices.tolist() == tp.unsorted_indices.tolist()
    tpad, tl = TR.pad_packed_sequence(tp, batch_first=True, padding_value=-1, total_length=5)
    epad, el = ER.pad_packed_sequence(ep, batch_first=True, padding_value=-1, total_length=5)
    _close(epad, tpad)
    assert el.tolist() == tl.tolist()
    seqs = [torch.randn(2, 3), torch.randn(4, 3)]
    _close(ER.pad_sequence([_ember(s) for s in seqs], True, 9., "left"),
           TR.pad_sequence(seqs, True, 9., "left"))
