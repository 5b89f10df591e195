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
    assert origin_of(x.to_sparse().detach()) is None
    assert origin_of(dense(False).to_sparse()) is None
    s = x.to_sparse()
    assert origin_of(s) is x and origin_of(s.coalesce()) is x
    assert origin_of(s.to_sparse_csr()) is x
    assert origin_of(s * 2) is None                     # an op, not a conversion


def test_an_origin_or_values_changed_in_place_is_forgotten():
    x = dense() * 1
    s = x.to_sparse()
    with ember.no_grad():
        x.mul_(2)
    assert origin_of(s) is None
    s = x.to_sparse()
    s.mul_(3)
    assert origin_of(s) is None
    s = x.to_sparse()
    s.add_(s)
    assert origin_of(s) is None
