"""A dense tensor made sparse gets a dense gradient from the products (NOTE [Dense origins])."""

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck
from ember.sparse._origin import origin_of

DENSE = [[1.0, 0.0, 2.0, 0.0], [0.0, 0.0, 3.0, 4.0], [0.0, 5.0, 0.0, 0.0]]
LAYOUTS = {"coo": lambda x: x.to_sparse(), "csr": lambda x: x.to_sparse_csr(),
           "csc": lambda x: x.to_sparse_csc(), "bsr": lambda x: x.to_sparse_bsr(1)}


def dense(requires_grad=True):
    return ember.tensor(DENSE, dtype=ember.float64, requires_grad=requires_grad)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_product_is_differentiated_as_the_dense_product(layout):
    """x -> x.to_sparse() @ w is x @ w, so its Jacobian is w's everywhere, zeros included."""
    make = LAYOUTS[layout]
    w = ember.randn(4, 2, dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda x, w: make(x) @ w, (dense(), w))
    assert gradgradcheck(lambda x, w: ember.mm(make(x), w) * 3, (dense(), w))
    assert gradcheck(lambda x, v: ember.mv(make(x), v), (dense(), w[:, 0].detach().clone()
                                                         .requires_grad_()))


def test_the_gradient_reaches_the_unstored_positions():
    x = dense()
    w = ember.arange(8.0, dtype=ember.float64).reshape(4, 2)
    (x.to_sparse().coalesce() @ w * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.tile(2 * w.numpy().sum(1), (3, 1)))


def test_masked_where_the_values_carry_the_gradient():
    x = dense()
    w = ember.arange(8.0, dtype=ember.float64).reshape(4, 2)
    ember.sparse.mm(x.to_sparse(), w).sum().backward()
    mask = np.array(DENSE) != 0
    np.testing.assert_allclose(x.grad.numpy(), np.tile(w.numpy().sum(1), (3, 1)) * mask)
    x.grad = None
    (x.to_sparse().sin() @ w).sum().backward()          # not linear: through the values
    assert (x.grad.numpy()[~mask] == 0).all()


def test_no_origin_without_a_graph():
    x = dense()
    with ember.no_grad():
        assert origin_of(x.to_sparse()) is None
        s = x.to_sparse()
    assert origin_of(x.to_sparse().detach()) is None
    assert origin_of(dense(False).to_sparse()) is None
    s = x.to_sparse()
    assert origin_of(s) is not None and origin_of(s.coalesce()) is origin_of(s)
    assert origin_of(s.to_sparse_csr()) is origin_of(s)
    assert origin_of(s * 2) is None                     # an op, not a conversion
    with ember.no_grad():
        assert origin_of(s.to_sparse_csr()) is None


def test_values_changed_in_place_forget_the_origin():
    x = dense()
    s = x.to_sparse()
    s.mul_(3)
    assert origin_of(s) is None
    s = x.to_sparse()
    s.add_(s)
    assert origin_of(s) is None


def _full_gradient(w):
    return np.tile(w.numpy().sum(1), (3, 1))


@pytest.mark.parametrize("change", ["scaled without grad", "detached in place"])
def test_the_origin_changing_later_does_not_change_where_the_gradient_goes(change):
    x = dense()
    w = ember.arange(8.0, dtype=ember.float64).reshape(4, 2)
    y = x * 1
    s = y.to_sparse()
    if change == "scaled without grad":
        with ember.no_grad():
            y.mul_(10)
    else:
        y.detach_()
    (s @ w).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), _full_gradient(w))


def test_the_origin_is_not_kept_alive_by_the_sparse_tensor():
    import gc
    import weakref
    x = dense()
    y = x * 1
    alive = weakref.ref(y)
    s = y.to_sparse()
    del y
    gc.collect()
    assert alive() is None
    w = ember.arange(8.0, dtype=ember.float64).reshape(4, 2)
    (s @ w).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), _full_gradient(w))
