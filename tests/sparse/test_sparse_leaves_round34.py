"""Sparse leaves' gradient plumbing: hooks, ``.grad`` assignment and ``.grad.zero_()``, the
gradient kept across in-place ops and optimizer steps, and the legacy ``new``/``size=``
constructors (values checked against hand-computed gradients)."""

import warnings

import pytest

import ember


def _leaf(requires_grad=True):
    i = ember.tensor([[0, 1], [1, 0]])
    return ember.sparse_coo_tensor(i, ember.tensor([1., 2.]), (2, 2), check_invariants=True,
                                   requires_grad=requires_grad)


def _dense(t):
    return t.to_dense().tolist()


def test_hook_on_leaf_sees_sparse_grad_and_replaces_it():
    s, seen = _leaf(), []
    s.register_hook(lambda g: seen.append((g.layout, _dense(g))) or g * 2)
    ember.sparse.sum(s * 3).backward()
    assert seen == [(ember.sparse_coo, [[0., 3.], [3., 0.]])]
    assert _dense(s.grad) == [[0., 6.], [6., 0.]]


def test_hook_returning_none_and_removed_hook():
    s = _leaf()
    s.register_hook(lambda g: None)
    handle = s.register_hook(lambda g: g * 100)
    handle.remove()
    ember.sparse.sum(s).backward()
    assert _dense(s.grad) == [[0., 1.], [1., 0.]]


def test_hook_on_uncoalesced_leaf_maps_back_to_duplicates():
    s = ember.sparse_coo_tensor(ember.tensor([[0, 0, 1]]), ember.tensor([1., 2., 3.]), (2,),
                                requires_grad=True)
    seen = []
    s.register_hook(lambda g: seen.append((g._nnz(), g.is_coalesced())) or g * 2)
    ember.sparse.sum(s).backward()
    assert seen == [(2, True)]
    assert _dense(s.grad) == [2., 2.]


def test_post_accumulate_hook_runs_with_the_leaf():
    s, seen = _leaf(), []
    s.register_post_accumulate_grad_hook(lambda p: seen.append((p is s, _dense(p.grad))))
    ember.sparse.sum(s * 2).backward()
    assert seen == [(True, [[0., 2.], [2., 0.]])]
    with pytest.raises(RuntimeError, match="non-leaf"):
        (s * 2).register_post_accumulate_grad_hook(lambda p: None)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        _leaf(False).register_hook(lambda g: g)


def test_hook_on_non_leaf_changes_the_leaf_grad():
    s, seen = _leaf(), []
    t = s * 3
    t.retain_grad()
    t.register_hook(lambda g: seen.append(_dense(g)) or g * 10)
    ember.sparse.sum(t).backward()
    assert seen == [[[0., 1.], [1., 0.]]]
    assert _dense(t.grad) == [[0., 10.], [10., 0.]]
    assert _dense(s.grad) == [[0., 30.], [30., 0.]]


def test_csr_leaf_hooks():
    c = _leaf(False).to_sparse_csr().requires_grad_()
    seen = []
    c.register_hook(lambda g: seen.append(g.layout) or g * 2)
    c.register_post_accumulate_grad_hook(lambda p: seen.append(_dense(p.grad)))
    c.values().sum().backward()
    assert seen == [ember.sparse_csr, [[0., 2.], [2., 0.]]]


def test_grad_zero_empties_the_leaf_grad():
    s = _leaf()
    ember.sparse.sum(s).backward()
    g = s.grad
    assert g.zero_() is g
    assert s.grad is g and s.grad._nnz() == 0 and _dense(s.grad) == [[0., 0.], [0., 0.]]
    ember.sparse.sum(s * 2).backward()
    assert _dense(s.grad) == [[0., 2.], [2., 0.]]


def test_zero_grad_keeping_sparse_grads():
    s = _leaf()
    ember.sparse.sum(s).backward()
    opt = ember.optim.SGD([s], lr=0.1)
    opt.zero_grad(set_to_none=False)
    assert s.grad.layout is ember.sparse_coo and s.grad._nnz() == 0
    ember.sparse.sum(s * 3).backward()
    assert _dense(s.grad) == [[0., 3.], [3., 0.]]
    opt.zero_grad()
    assert s.grad is None


def test_sgd_steps_keep_the_grad():
    s = _leaf()
    opt = ember.optim.SGD([s], lr=0.1, momentum=0.9)
    ember.sparse.sum(s * s).backward()
    opt.step()                      # v = 2 * [1, 2]; s = [1, 2] - 0.1 * v
    assert s.to_dense().flatten().tolist() == pytest.approx([0., 0.8, 1.6, 0.])
    assert _dense(s.grad) == [[0., 2.], [4., 0.]]


@pytest.mark.parametrize("op", [lambda s: s.mul_(2), lambda s: s.zero_(),
                                lambda s: s.add_(_leaf(False))])
def test_in_place_under_no_grad_keeps_grad_and_hooks(op):
    s, seen = _leaf(), []
    s.register_hook(lambda g: seen.append(1))
    ember.sparse.sum(s).backward()
    with ember.no_grad():
        op(s)
    assert _dense(s.grad) == [[0., 1.], [1., 0.]]
    ember.sparse.sum(s * 2).backward()
    assert seen == [1, 1]
    assert _dense(s.grad) == ([[0., 1.], [1., 0.]] if s._nnz() == 0 else [[0., 3.], [3., 0.]])


def test_assign_sparse_grad():
    s = _leaf()
    g = _leaf(False) * 5
    s.grad = g
    assert s.grad is g
    ember.sparse.sum(s).backward()
    assert _dense(s.grad) == [[0., 6.], [11., 0.]]
    s.grad = None
    assert s.grad is None


def test_assign_grad_checks():
    s = _leaf()
    with pytest.raises(RuntimeError, match="data of a different type"):
        s.grad = ember.ones(2, 2)
    with pytest.raises(RuntimeError, match="with dtype 'double'"):
        s.grad = _leaf(False).double()
    with pytest.raises(RuntimeError, match=r"of size '\[3\]' to a tensor of size '\[2, 2\]'"):
        s.grad = ember.sparse_coo_tensor(ember.tensor([[0]]), ember.tensor([1.]), (3,))
    with pytest.raises(RuntimeError, match="device type 'meta'"):
        s.grad = _leaf(False).to("meta")
    c = _leaf(False).to_sparse_csr().requires_grad_()
    c.grad = _leaf(False)           # (any sparse layout, as PyTorch's)
    assert c.grad.layout is ember.sparse_coo
    d = ember.zeros(2, 2, requires_grad=True)
    d.grad = _leaf(False)
    assert d.grad.layout is ember.sparse_coo


def test_legacy_sparse_type_size_keyword():
    i, v = ember.tensor([[0, 1], [1, 0]]), ember.tensor([1., 2.])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = ember.sparse.FloatTensor(i, v, size=(3, 3))
        assert s.shape == (3, 3) and _dense(s)[1] == [2., 0., 0.]
        e = ember.sparse.FloatTensor(size=(3, 4))
        assert e.layout is ember.sparse_coo and e.shape == (3, 4) and e._nnz() == 0
        with pytest.raises(TypeError, match="multiple values for argument 'size'"):
            ember.sparse.FloatTensor(i, v, (3, 3), size=(3, 3))
        with pytest.raises(TypeError, match=r"got \(Tensor, size=tuple\)"):
            ember.sparse.FloatTensor(i, size=(3, 3))
    assert ember.FloatTensor(size=(2, 3)).shape == (2, 3)
    assert ember.Tensor(size=(2,)).shape == (2,)
    assert ember.zeros(1).new(size=(3,)).shape == (3,)
    with pytest.raises(TypeError, match=r"got \(int, size=tuple\)"):
        ember.FloatTensor(2, size=(3, 3))


def test_sparse_new():
    i, v = ember.tensor([[0, 1], [1, 0]]), ember.tensor([1., 2.])
    s0 = _leaf(False).double()
    s = s0.new(i, v, (3, 3))
    assert s.layout is ember.sparse_coo and s.shape == (3, 3) and s.dtype is ember.float32
    assert s0.new(i, v, size=(3, 3)).shape == (3, 3)
    assert s0.new(i, ember.tensor([1, 2])).dtype is ember.int64      # (the values' dtype)
    assert not _leaf().new(i, v).requires_grad
    for e, size in ((s0.new(3, 3), (3, 3)), (s0.new(ember.Size([2, 5])), (2, 5)),
                    (s0.new(), (0,)), (s0.new(size=(4,)), (4,))):
        assert e.layout is ember.sparse_coo and e.shape == size and e._nnz() == 0
        assert e.dtype is ember.float64
    with pytest.raises(TypeError, match=r"got \(list\)"):
        s0.new([1., 2.])
    with pytest.raises(RuntimeError, match="expected scalar type Long but found Int"):
        s0.new(i.int(), v)
    with pytest.raises(RuntimeError, match="to a unique layout"):
        s0.to_sparse_csr().new(i, v)
