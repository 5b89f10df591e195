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
    assert origin_of(s.to_sparse_csr()) is not None     # (passing the gradient on as COO)
    assert origin_of(s * 2) is not None                 # linear: its gradient scaled
    factor = ember.tensor(2.0, dtype=s.dtype, requires_grad=True)
    assert origin_of(s * factor) is None                # a factor's gradient: the values'
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


def test_a_transposed_sparse_leaf_gets_a_dense_gradient():
    """``x @ w.t()`` with a sparse leaf ``w``: the gradient is dense (x^T-products at every
    position, as for ``w @ x``), not restricted to the stored elements."""
    xn = np.arange(8.0).reshape(2, 4) / 4
    w = ember.tensor(DENSE, dtype=ember.float64).to_sparse().requires_grad_()
    x = ember.from_numpy(xn)
    (x @ w.t()).sum().backward()
    assert w.grad.layout == ember.strided
    np.testing.assert_allclose(w.grad.numpy(), np.ones((2, 3)).T @ xn, rtol=1e-12)


def test_a_transpose_without_grad_mode_makes_no_dense_stand_in():
    """Only a transpose recorded for autograd gives a sparse leaf its dense stand-in."""
    w = ember.tensor(DENSE).to_sparse().requires_grad_()
    with ember.no_grad():
        t = w.t()
    assert w._anchor is None and origin_of(t) is None
    assert origin_of(w.t()) is not None and w._anchor is not None


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (4,)])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_with_a_sparse_weight(layout, shape, bias):
    """F.linear with a sparse (pruned) weight is the dense linear, gradients included;
    PyTorch's 2-D input with a bias goes through addmm, which has no dense-by-COO kernel,
    and other inputs with a bias through a transposed addmm (a ViewBackward0 node)."""
    rng = np.random.default_rng(0)
    xn, bn = rng.standard_normal(shape), rng.standard_normal(3)
    w = LAYOUTS[layout](ember.tensor(DENSE, dtype=ember.float64)).requires_grad_()
    x = ember.from_numpy(xn).requires_grad_()
    b = ember.from_numpy(bn) if bias else None
    if layout == "coo" and bias and len(shape) == 2:
        with pytest.raises(RuntimeError, match="^addmm_sparse_dense: expected either 'mat1'"):
            ember.nn.functional.linear(x, w, b)
        return
    out = ember.nn.functional.linear(x, w, b)
    if bias and len(shape) != 2:
        assert out.grad_fn.name() == "ViewBackward0"
    np.testing.assert_allclose(out.detach().numpy(),
                               xn @ np.array(DENSE).T + (bn if bias else 0), rtol=1e-12)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.broadcast_to(np.array(DENSE).sum(0), shape),
                               rtol=1e-12)
    rows = xn.reshape(-1, 4)
    np.testing.assert_allclose(w.grad.numpy(), np.ones((len(rows), 3)).T @ rows, rtol=1e-12)


def test_compressed_products_name_the_operands_shapes():
    """A product PyTorch runs on a compressed (or sparse-by-sparse) kernel reports the shapes
    of both operands; mv its own sizes; F.linear refuses a 0-D input."""
    w = ember.ones(4, 5).to_sparse_csr()
    with pytest.raises(RuntimeError, match=r"^mat1 and mat2 shapes cannot be multiplied "
                                           r"\(4x5 and 4x2\)$"):
        ember.mm(w, ember.ones(4, 2))
    with pytest.raises(RuntimeError, match=r"^mat1 and mat2 shapes cannot be multiplied "
                                           r"\(1x3 and 4x5\)$"):
        ember.ones(3) @ w
    with pytest.raises(RuntimeError, match=r"^mat1 and mat2 shapes cannot be multiplied "
                                           r"\(4x5 and 4x6\)$"):
        ember.nn.functional.linear(ember.ones(2, 3, 4), w, ember.ones(4))
    with pytest.raises(RuntimeError, match=r"^size mismatch, got input \(4\), mat \(4x5\), "
                                           r"vec \(4\)$"):
        w @ ember.ones(4)
    with pytest.raises(RuntimeError, match=r"^mat1 and mat2 shapes cannot be multiplied "
                                           r"\(4x5 and 4x3\)$"):
        ember.mm(w.to_sparse(), ember.ones(4, 3).to_sparse())
    with pytest.raises(RuntimeError, match="^both arguments to linear need to be at least 1D, "
                                           "but they are 0D and 2D$"):
        ember.nn.functional.linear(ember.ones(()), w)
