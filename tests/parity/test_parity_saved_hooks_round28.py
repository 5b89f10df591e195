"""Saved-tensor hooks and advanced indexing against PyTorch: the index tensors (``x[idx]``'s
indices, ``x[mask]``'s mask, ``index_put``'s indices) reach the pack hook, in PyTorch's order
and number (gather, take, masked_select: the index before ``self``); backward and
``grad_fn._saved_indices`` use what the unpack hook returns, unpacked once per backward,
without the version check of unhooked saved tensors."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _setitem(lib, x, key, value):
    y = x * 1
    y[key] = value
    return y


# (name, fn(lib, x, idx, mask) -> output); x is 4x3, idx int64 [0, 2, 2], mask bool (4,)
CASES = [
    ("index", lambda lib, x, i, m: x[i]),
    ("index_dim1", lambda lib, x, i, m: x[:, i[:2]]),
    ("index_two", lambda lib, x, i, m: x[i, i]),
    ("index_slice", lambda lib, x, i, m: x[i, 1:]),
    ("index_none", lambda lib, x, i, m: x[None, i]),
    ("index_int", lambda lib, x, i, m: x[0, i[:2]]),
    ("index_list", lambda lib, x, i, m: x[[0, 1]]),
    ("mask", lambda lib, x, i, m: x[m]),
    ("mask_2d", lambda lib, x, i, m: x[x.detach() > 0]),
    ("setitem", lambda lib, x, i, m: _setitem(lib, x, i, lib.ones(3, 3, requires_grad=True))),
    ("setitem_mask", lambda lib, x, i, m: _setitem(lib, x, m, 2.0)),
    ("index_put_acc", lambda lib, x, i, m: (x * 1).index_put((i,), lib.ones(3, 3),
                                                             accumulate=True)),
    ("index_put_", lambda lib, x, i, m: (x * 1).index_put_((i,), lib.ones(3))),
    ("gather", lambda lib, x, i, m: x.gather(1, lib.tensor([[0], [1], [2], [0]]))),
    ("take", lambda lib, x, i, m: x.take(i)),
    ("take_along_dim", lambda lib, x, i, m: x.take_along_dim(lib.tensor([[0, 1, 2]]), 0)),
    ("masked_select", lambda lib, x, i, m: x.masked_select(x.detach() > 0)),
    ("index_select", lambda lib, x, i, m: x.index_select(0, i)),
]


def _packs(lib, fn):
    log = []

    def pack(t):
        log.append(("pack", tuple(t.shape), str(t.dtype).split(".")[-1]))
        return t

    def unpack(t):
        log.append(("unpack", tuple(t.shape)))
        return t
    gen = np.random.default_rng(0)
    x = lib.tensor(gen.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    idx, mask = lib.tensor([0, 2, 2]), lib.tensor([True, False, True, True])
    with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = fn(lib, x, idx, mask)
    y.sum().backward()
    return log, x.grad.numpy()


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_index_tensors_packed_as_torch(name, fn):
    ours, theirs = _packs(ember, fn), _packs(torch, fn)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)


def _unpack_used(lib):
    """Backward and ``_saved_indices`` read the unpacked indices, not the originals."""
    x = lib.arange(12.0).reshape(4, 3).requires_grad_()
    idx = lib.tensor([0, 2, 2])
    count = [0, 0]

    def pack(t):
        count[0] += 1
        return t + 1            # moves every index one row down

    def unpack(t):
        count[1] += 1
        return t
    with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = x[idx]
        z = (x * 1).index_put((idx,), lib.full((3,), 5.0, requires_grad=True))
    saved = y.grad_fn._saved_indices[0].tolist()
    idx[0] = 3                  # no version check on packed tensors
    y.sum().backward(retain_graph=True)
    first = x.grad.tolist()
    y.sum().backward()
    z.sum().backward()
    return saved, first, x.grad.tolist(), count


def test_backward_reads_unpacked_indices():
    assert _unpack_used(ember) == _unpack_used(torch)


def test_unhooked_index_still_checks_versions():
    for lib in (ember, torch):
        x = lib.ones(4, 3, requires_grad=True)
        idx = lib.tensor([0, 2])
        y = x[idx]
        idx[0] = 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_raising_unpack_hook_on_indices():
    for lib in (ember, torch):
        x = lib.ones(4, 3, requires_grad=True)

        def unpack(t):
            raise ValueError("no indices today")
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
            y = x[lib.tensor([0, 2])]
        with pytest.raises(ValueError, match="no indices today"):
            y.sum().backward()


def _after_backward(lib, make):
    x = lib.ones(4, 3, requires_grad=True)
    y = make(lib, x, lib.tensor([0, 2, 2]))
    y.sum().backward()
    out = []
    for read in (lambda: y.grad_fn._saved_indices, lambda: y.sum().backward()):
        try:
            read()
            out.append("ok")
        except RuntimeError as e:
            out.append(str(e)[:60])
    return out


@pytest.mark.parametrize("make", [lambda lib, x, i: x[i],
                                  lambda lib, x, i: (x * 1).index_put((i,), lib.ones(3))],
                         ids=["index", "index_put"])
def test_indices_freed_by_backward(make):
    ours, theirs = _after_backward(ember, make), _after_backward(torch, make)
    assert ours == theirs
    assert theirs[0].startswith("Trying to backward through the graph a second time")
