"""Sparse leaves' gradients (round 35): hooks on the dense-gradient path, a stored ``.grad``,
coalesced flags, dense gradients through index_select / narrow_copy / mul by a dense tensor,
batched CSR select, sparse.mm's layout errors (expected values are PyTorch 2.13's)."""

import pytest

import ember


def _leaf():
    i = ember.tensor([[0, 1, 1], [1, 0, 1]])
    return ember.sparse_coo_tensor(i, ember.tensor([1., 2., 3.]), (2, 2)).coalesce() \
        .requires_grad_()


@pytest.mark.parametrize("product", ["mm", "matmul", "addmm", "mv"])
def test_hooks_run_on_the_dense_gradient_of_products(product):
    s, seen = _leaf(), []
    s.register_hook(lambda g: seen.append(("hook", g.layout, g.tolist())))
    s.register_post_accumulate_grad_hook(lambda t: seen.append(("post", t.grad.layout)))
    d = ember.ones(2, 3)
    if product == "mm":
        y = ember.mm(s, d)
    elif product == "matmul":
        y = s @ d
    elif product == "addmm":
        y = ember.addmm(ember.zeros(2, 3), s, d)
    else:
        y = ember.mv(s, ember.ones(2))
    y.sum().backward()
    full = 3.0 if product != "mv" else 1.0
    assert seen == [("hook", ember.strided, [[full, full], [full, full]]),
                    ("post", ember.strided)]


def test_hook_result_replaces_the_dense_gradient_and_handle_removes_both():
    s = _leaf()
    handle = s.register_hook(lambda g: g * 2)
    (s @ ember.ones(2, 1)).sum().backward()
    assert s.grad.tolist() == [[2., 2.], [2., 2.]]
    handle.remove()
    s.grad = None
    (s @ ember.ones(2, 1)).sum().backward()
    assert s.grad.tolist() == [[1., 1.], [1., 1.]]


def test_stored_grad_is_one_object_and_follows_backwards():
    s = _leaf()
    ember.sparse.sum(s).backward()
    g = s.grad
    assert g is s.grad and g.is_coalesced()
    ember.sparse.sum(s).backward()
    assert s.grad.to_dense().tolist() == [[0., 2.], [2., 2.]]
    assert not s.grad.is_coalesced()
    assert s.grad is s.grad


def test_hook_returning_a_new_gradient_stores_it_uncoalesced():
    s = _leaf()
    s.register_hook(lambda g: g * 2)
    ember.sparse.sum(s).backward()
    assert not s.grad.is_coalesced()
    t = _leaf()
    t.register_hook(lambda g: g)
    ember.sparse.sum(t).backward()
    assert t.grad.is_coalesced()


def test_coalesce_of_an_uncoalesced_leaf_passes_values_gradient_coalesced():
    i = ember.tensor([[0, 1, 1], [1, 0, 1]])
    s = ember.sparse_coo_tensor(i, ember.tensor([1., 2., 3.]), (2, 2)).requires_grad_()
    s.coalesce().values().sum().backward()
    assert s.grad.is_coalesced()


def test_dense_gradient_onto_an_assigned_sparse_one():
    s = _leaf()
    s.grad = s.detach() * 0.5
    (s @ ember.ones(2, 1)).sum().backward()
    assert s.grad.layout is ember.strided
    assert s.grad.tolist() == [[1.0, 1.5], [2.0, 2.5]]


@pytest.mark.parametrize("chain", ["index_select", "narrow_copy", "mul_dense"])
def test_products_pass_dense_gradients_through(chain):
    s = _leaf()
    if chain == "index_select":
        x, expected = s.index_select(1, ember.tensor([1, 0])), [[1., 1.], [1., 1.]]
    elif chain == "narrow_copy":
        x, expected = s.narrow_copy(0, 1, 1), [[0., 0.], [1., 1.]]
    else:
        x, expected = s * ember.tensor([[2., 3.], [4., 5.]]), [[2., 3.], [4., 5.]]
    (x @ ember.ones(2, 1)).sum().backward()
    assert s.grad.layout is ember.strided
    assert s.grad.tolist() == expected


def test_batched_csr_select():
    d = ember.arange(1., 25.).reshape(2, 3, 4)
    b = d.to_sparse_csr()
    assert b.select(0, 1).layout is ember.sparse_csr
    assert b.select(0, -1).to_dense().tolist() == d[1].tolist()
    with pytest.raises(RuntimeError, match="selecting sparse dimensions is not supported"):
        b.select(1, 0)


def test_sparse_mm_mixed_layouts_refuse_as_torch():
    eye = ember.eye(3)
    coo, csr, csc = eye.to_sparse(), eye.to_sparse_csr(), eye.to_sparse_csc()
    with pytest.raises(RuntimeError, match=r"Sparse \+ SparseCsr @ Sparse"):
        ember.sparse.mm(csr, coo)
    with pytest.raises(RuntimeError, match=r"SparseCsc \+ SparseCsr @ SparseCsc"):
        ember.sparse.mm(csr, csc)
    with pytest.raises(RuntimeError, match="non-block"):
        ember.sparse.mm(csr, eye.to_sparse_bsr((1, 1)))
    assert ember.sparse.mm(csr, csr).to_dense().tolist() == eye.tolist()


def test_csr_add_dense_in_place_refuses_as_torch():
    with pytest.raises(RuntimeError, match="Sparse CSR tensors do not have is_contiguous"):
        ember.eye(2).to_sparse_csr().add_(ember.ones(2, 2))


def test_values_of_a_csc_made_from_a_csr_leaf_differentiate():
    d = ember.tensor([[1., 0.], [2., 3.]])
    s = d.to_sparse_csr().requires_grad_()
    (s.t().values() ** 2).sum().backward()
    assert s.grad.to_dense().tolist() == [[2., 0.], [4., 6.]]
