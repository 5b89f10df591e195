"""frobenius_norm and nuclear_norm (ember/ops/legacy_norms.py), PyTorch's deprecated norms.
Expected values and messages were checked against PyTorch 2.13."""

import numpy as np
import pytest

import ember
from ember.ops.legacy_norms import frobenius_norm, nuclear_norm

pytestmark = pytest.mark.filterwarnings("ignore:at::")


def _x():
    return ember.tensor(np.arange(24.0).reshape(2, 3, 4) ** 1.5 / 10)


@pytest.mark.parametrize("args, kwargs, shape, values", [
    (((0, 1),), {}, (4,), [12.0, 13.1248, 14.2997, 15.5248]),
    (((1,),), {"keepdim": True}, (2, 1, 4),
     [2.4, 2.924, 3.4986, 4.1243, 11.7576, 12.7949, 13.8651, 14.967]),
    (((),), {}, (), [27.6]),
    ((-1,), {}, (2, 3), [0.6, 2.735, 5.9766, 10.022, 14.7309, 20.019]),
])
def test_frobenius_norm(args, kwargs, shape, values):
    r = frobenius_norm(_x(), *args, **kwargs)
    assert r.shape == shape and r.dtype == ember.float64
    np.testing.assert_allclose(np.asarray(r).ravel(), values, atol=1e-4)


@pytest.mark.parametrize("args, kwargs, shape, values", [
    ((), {}, (2,), [7.0373, 27.2176]),
    ((True,), {}, (2, 1, 1), [7.0373, 27.2176]),
    ((), {"dim": (2, 1), "keepdim": True}, (2, 1, 1), [7.0373, 27.2176]),
    (((0, 2),), {}, (3,), [10.3717, 15.497, 21.4339]),
])
def test_nuclear_norm(args, kwargs, shape, values):
    r = nuclear_norm(_x(), *args, **kwargs)
    assert r.shape == shape and r.dtype == ember.float64
    np.testing.assert_allclose(np.asarray(r).ravel(), values, atol=1e-4)


def test_they_warn_and_are_differentiable():
    with pytest.warns(UserWarning, match=r"at::frobenius_norm is deprecated .* Please use "
                                         r"`linalg.vector_norm\(A, 2., dim, keepdim\)` instead"):
        r = frobenius_norm(ember.tensor([3.0, 4.0], requires_grad=True), (0,))
    assert r.item() == 5.0 and r.grad_fn is not None
    with pytest.warns(UserWarning, match=r"at::nuclear_norm is deprecated .* Please use "
                                         r"`linalg.matrix_norm\(A, 'nuc', dim, keepdim\)`"):
        a = ember.tensor([[2.0, 0.0], [0.0, -3.0]], requires_grad=True)
        nuclear_norm(a).backward()
    assert a.grad.tolist() == [[1.0, 0.0], [0.0, -1.0]]


def test_out():
    out = ember.empty(0, dtype=ember.float64)
    assert frobenius_norm(_x(), (1, 2), out=out) is out and out.shape == (2,)
    out = ember.empty(0, dtype=ember.float64)
    assert nuclear_norm(_x(), out=out) is out
    np.testing.assert_allclose(np.asarray(out), [7.0373, 27.2176], atol=1e-4)


@pytest.mark.parametrize("call, message", [
    (lambda x: frobenius_norm(x, (0, 0)), "dim 0 appears multiple times in the list of dims"),
    (lambda x: frobenius_norm(x, (0, 1, 2)),
     "Expected at most 2 dimensions, but got 3 dimensions instead."),
    (lambda x: frobenius_norm(x.int(), (0,)),
     "norm(): input dtype should be either floating point or complex. Got Int instead."),
    (lambda x: frobenius_norm(x, (1, 2), out=ember.empty(0)),
     "Expected out tensor to have dtype double, but got float instead"),
    (lambda x: nuclear_norm(x, 1), "linalg.matrix_norm: dims must be different. Got (1, 1)"),
    (lambda x: nuclear_norm(x, (0, 1, 2)), "linalg.matrix_norm: dim must be a 2-tuple. Got 0 1 2"),
    (lambda x: nuclear_norm(x[0, 0]),
     "linalg.matrix_norm: The input tensor A must have at least 2 dimensions."),
    (lambda x: nuclear_norm(x.int()),
     "linalg.matrix_norm: Expected a floating point or complex tensor as input. Got Int"),
    (lambda x: nuclear_norm(x, out=ember.empty(0)),
     "linalg.matrix_norm expected out tensor dtype Double but got: Float"),
])
def test_errors(call, message):
    with pytest.raises(RuntimeError) as info:
        call(_x())
    assert str(info.value) == message
