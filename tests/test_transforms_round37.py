"""Regression tests for the bugs round 37's transforms fuzzer found (torch-free)."""

import math

import pytest

import ember
from ember.distributions import constraints
from ember.distributions.transforms import (AffineTransform, CorrCholeskyTransform,
                                            IndependentTransform, SoftmaxTransform,
                                            StickBreakingTransform)
from ember.distributions.utils import _sum_rightmost


def test_broadcast_shapes_mismatch_names_padded_result():
    with pytest.raises(RuntimeError, match=r"had \(1, 3\); but expected shape should be "
                                           r"broadcastable to \[1, 6\]$"):
        ember.broadcast_shapes((6,), (1, 3), (3,))
    with pytest.raises(RuntimeError, match=r"broadcastable to \[1, 1, 1, 2\]$"):
        ember.broadcast_shapes((1, 2), (1, 1, 1, 3))
    assert ember.broadcast_shapes((2, 1), (1, 1, 3)) == (1, 2, 3)
    assert ember.broadcast_shapes() == ()


def test_broadcast_shapes_negative_sizes_checked_after_each_shape():
    # a negative size already broadcast in is a ValueError; one that meets a mismatch first
    # is the mismatch
    with pytest.raises(ValueError, match="negative length"):
        ember.broadcast_shapes((-1,), (2,))
    with pytest.raises(ValueError, match="negative length"):
        ember.broadcast_shapes((1,), (-1,))
    with pytest.raises(RuntimeError, match=r"dimension of length -1 at -1! .* had \(-1,\)"):
        ember.broadcast_shapes((2,), (-1,))


def test_affine_log_det_with_event_dim_past_the_scale_dims():
    t = AffineTransform(ember.tensor([1.0, 2.0, 3.0]), ember.tensor([[0.5], [-3.0]]),
                        event_dim=3)
    x = ember.tensor([[0.0, 1.0, 2.0]])
    ladj = t.log_abs_det_jacobian(x, t(x))
    assert ladj.shape == ()
    assert math.isclose(ladj.item(), math.log(1.5), rel_tol=1e-6)
    t1 = AffineTransform(0.0, ember.tensor([[0.5], [-3.0]]), event_dim=1)
    x1 = ember.zeros(2, 1)
    assert ember.allclose(t1.log_abs_det_jacobian(x1, t1(x1)),
                          ember.tensor([math.log(0.5), math.log(3.0)]))


def test_sum_rightmost_past_the_value_dims_sums_everything():
    value = ember.tensor([[1.0], [2.0]])
    assert _sum_rightmost(value, 3).item() == 3.0
    assert _sum_rightmost(value, 1).tolist() == [1.0, 2.0]


def test_stick_breaking_of_integer_bool_and_complex_inputs():
    y = StickBreakingTransform()(ember.tensor([0, 1, -1]))
    assert y.dtype == ember.float32
    assert ember.allclose(y, ember.tensor([0.25, 0.4321, 0.0855, 0.2324]), atol=1e-4)
    assert StickBreakingTransform()(ember.tensor([0, 1], dtype=ember.int32)).dtype \
        == ember.float32
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool"):
        StickBreakingTransform()(ember.tensor([True, False]))
    with pytest.raises(NotImplementedError, match="clamp is not supported for complex types"):
        StickBreakingTransform()(ember.tensor([0.5 + 1j, 1.0]))


def test_softmax_transform_errors_are_max_errors():
    with pytest.raises(IndexError, match=r"^max\(\): Expected reduction dim 0 to have"):
        SoftmaxTransform()(ember.zeros(0))
    with pytest.raises(RuntimeError, match=r"^max\(\): does not support complex input"):
        SoftmaxTransform()(ember.zeros(2, dtype=ember.complex128))
    y = SoftmaxTransform()(ember.tensor([[1.0, 2.0], [3.0, 3.0]]).t())
    assert ember.allclose(y, ember.tensor([[0.1192, 0.8808], [0.2689, 0.7311]]), atol=1e-4)


def test_corr_cholesky_inverse_of_a_matrix_that_is_not_square():
    with pytest.raises(IndexError, match=r"The shape of the mask \[3, 3\] at index 0 does not "
                                         r"match the shape of the indexed tensor \[2, 6, 3\]"):
        CorrCholeskyTransform().inv(ember.ones(2, 6, 3))
    x = ember.tensor([0.3, -0.2, 0.5])
    t = CorrCholeskyTransform()
    assert ember.allclose(t.inv(t(x)), x, atol=1e-6)


def test_independent_constraint_argument_checks_are_assertion_errors():
    with pytest.raises(AssertionError, match=r"^reinterpreted_batch_ndims must be >= 0, "
                                             r"got -1$"):
        constraints.independent(constraints.real, -1)
    with pytest.raises(AssertionError, match=r"^reinterpreted_batch_ndims must be an int, "
                                             r"got float$"):
        constraints.independent(constraints.real, 1.5)
    with pytest.raises(AssertionError, match=r"^base_constraint must be a Constraint, got str$"):
        constraints.independent("real", 1)
    # the transform builds its domain from the constraint, on first use
    with pytest.raises(AssertionError, match="must be >= 0"):
        IndependentTransform(StickBreakingTransform(), -1)(ember.zeros(3))


def test_compose_log_det_of_one_part_is_that_part_s():
    from ember.distributions.transforms import (ComposeTransform, ExpTransform,
                                                SigmoidTransform)
    t = ComposeTransform([IndependentTransform(ExpTransform(), 1)]).inv
    ladj = t.log_abs_det_jacobian(ember.ones(2, 3), ember.zeros(2, 3))
    assert ladj.tolist() == [0.0, 0.0] and all(math.copysign(1, v) < 0 for v in ladj.tolist())
    x = ember.tensor([0.5, -1.0], requires_grad=True)
    part = SigmoidTransform()
    ours = ComposeTransform([part]).log_abs_det_jacobian(x, part(x))
    assert type(ours.grad_fn).__name__ == type(part.log_abs_det_jacobian(x, part(x))
                                               .grad_fn).__name__
    two = ComposeTransform([part, ExpTransform()]).log_abs_det_jacobian(x, part(x).exp())
    assert type(two.grad_fn).__name__ == "AddBackward0"


def test_corr_cholesky_inverse_ends_in_a_division():
    y = CorrCholeskyTransform()(ember.tensor([0.3, -0.2, 0.5], requires_grad=True))
    assert type(CorrCholeskyTransform().inv(y).grad_fn).__name__ == "DivBackward0"


def test_validation_error_inside_jvp_names_a_tensor():
    d = ember.distributions.Exponential(ember.tensor(1.0), validate_args=True)
    with pytest.raises(ValueError, match=r"^Expected value argument \(Tensor of shape \(2,\)\)"):
        ember.func.jvp(d.log_prob, (ember.tensor([-1.0, 1.0]),), (ember.ones(2),))


def test_corr_cholesky_of_an_integer_input_is_float():
    y = CorrCholeskyTransform()(ember.tensor([0, 1, 2]))
    assert y.dtype == ember.float32
    want = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.7616, 0.6247, 0.1723]]
    assert ember.allclose(y, ember.tensor(want), atol=1e-4)
    assert CorrCholeskyTransform()(ember.tensor([True, False, True])).dtype == ember.float32
