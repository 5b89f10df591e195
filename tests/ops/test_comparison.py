"""Behaviour of ops/comparison.py beyond the OpInfo checks: Python operators, allclose and
equal, aliases, in-place and out= forms (values checked against PyTorch 2.13)."""

import pytest

import ember

NAN = float("nan")


def test_python_operators_use_the_registered_ops():
    i, f = ember.tensor([1, 2, 3]), ember.tensor([1., 2., 3.])
    b = ember.tensor([True, False, True])
    assert (i < 2).tolist() == [True, False, False]
    assert (2 < f).tolist() == [False, False, True]
    assert (f >= i).tolist() == [True, True, True]
    assert (f == 2).tolist() == [False, True, False]
    assert (f != 2).tolist() == [True, False, True]
    assert (i <= 2.5).tolist() == [True, True, False]
    assert (~b).tolist() == [False, True, False]
    assert (~i).tolist() == [-2, -3, -4]
    assert (b | b).tolist() == [True, False, True] and (b ^ i).tolist() == [0, 2, 2]
    assert (i & True).tolist() == [1, 0, 1] and (2 & i).tolist() == [0, 2, 2]
    assert (i << 2).tolist() == [4, 8, 12] and (2 << i).tolist() == [4, 8, 16]
    assert (i >> 1).tolist() == [0, 1, 1]
    assert (i << 70).tolist() == [0, 0, 0]
    assert (ember.tensor([-8]) >> 70).tolist() == [-1]
    t = i.clone()
    t <<= 1
    assert t.tolist() == [2, 4, 6]


def test_shift_amounts_outside_the_width():
    i8 = ember.tensor([100], dtype=ember.int8)
    amounts = ember.tensor([1, 7, 8, 9, -1], dtype=ember.int8)
    assert ember.bitwise_left_shift(i8, amounts).tolist() == [-56, 0, 0, 0, 0]
    assert ember.bitwise_right_shift(-i8, amounts).tolist() == [-50, -1, -1, -1, -1]
    assert ember.bitwise_right_shift(ember.tensor([200], dtype=ember.uint8), 9).tolist() == [0]
    assert ember.bitwise_left_shift(ember.tensor([1, 2, 3]), 63).tolist() == \
        [-2 ** 63, 0, -2 ** 63]
    assert ember.bitwise_left_shift(ember.tensor([True, False]), 1).tolist() == [2, 0]


def test_comparison_dtypes_and_wrapping():
    u = ember.tensor([1, 2, 3], dtype=ember.uint8)
    assert (u < -1).tolist() == [True, True, True]         # -1 wraps to 255, as in PyTorch
    assert ember.eq(ember.tensor([True, False]), 1).tolist() == [True, False]
    assert ember.eq(ember.tensor([True, False]), 2).tolist() == [False, False]
    assert ember.ne(ember.tensor([NAN]), NAN).tolist() == [True]
    assert ember.eq(ember.ones(2, dtype=ember.complex64), 1).tolist() == [True, True]
    assert ember.bitwise_and(ember.tensor([True, False]), 2).dtype is ember.int64
    assert ember.bitwise_and(u, ember.tensor([1], dtype=ember.int8)).dtype is ember.int16


def test_inplace_and_out_forms_keep_the_destination_dtype():
    f, i = ember.tensor([1., 2., 3.]), ember.tensor([1, 2, 3])
    t = f.clone()
    assert t.lt_(2) is t and t.tolist() == [1., 0., 0.] and t.dtype is ember.float32
    assert i.clone().lt_(2.5).tolist() == [1, 1, 0]
    assert i.clone().logical_and_(ember.tensor([True, False, True])).tolist() == [1, 0, 1]
    assert f.clone().logical_not_().tolist() == [0., 0., 0.]
    out = ember.empty(0)
    assert ember.lt(f, 2, out=out) is out and out.tolist() == [1., 0., 0.]
    out = ember.empty(0, dtype=ember.int32)
    assert ember.logical_not(i, out=out).tolist() == [0, 0, 0] and out.dtype is ember.int32
    assert f.clone().greater_(1).tolist() == [0., 1., 1.]


def test_aliases():
    f = ember.tensor([1., 2., 3.])
    for alias, name in (("greater", "gt"), ("greater_equal", "ge"), ("less", "lt"),
                        ("less_equal", "le"), ("not_equal", "ne")):
        assert getattr(ember, alias)._ember_op is getattr(ember, name)._ember_op
        assert getattr(ember, alias).__name__ == alias     # its own entry point, as PyTorch's
        assert getattr(f, alias)(2).tolist() == getattr(f, name)(2).tolist()


def test_isclose_integers_do_not_wrap():
    u = ember.tensor([1, 2, 3], dtype=ember.uint8)
    assert ember.isclose(u, u + 1, atol=1).tolist() == [True, True, True]
    i8 = ember.tensor([-128], dtype=ember.int8)
    assert ember.isclose(i8, ember.tensor([127], dtype=ember.int8), atol=1, rtol=0).tolist() \
        == [False]
    inf = float("inf")
    a, b = ember.tensor([inf, -inf, inf, NAN]), ember.tensor([inf, inf, 1e38, NAN])
    assert ember.isclose(a, b).tolist() == [True, False, False, False]
    assert ember.isclose(a, b, equal_nan=True).tolist() == [True, False, False, True]


def test_allclose_and_equal_return_python_bools():
    f = ember.tensor([1., 2., 3.])
    assert ember.allclose(f, f + 1e-9) is True
    assert ember.allclose(f, ember.ones(1)) is False          # broadcasts
    assert ember.allclose(ember.tensor([NAN]), ember.tensor([NAN])) is False
    assert ember.allclose(ember.tensor([NAN]), ember.tensor([NAN]), equal_nan=True) is True
    assert f.allclose(f) is True
    assert ember.allclose(ember.empty(0), ember.empty(0)) is True
    assert ember.equal(f, ember.tensor([1, 2, 3])) is True    # dtypes may differ
    assert ember.equal(ember.tensor([0.1]), ember.tensor([0.1], dtype=ember.float64)) is False
    assert ember.equal(f, ember.ones(1)) is False             # no broadcasting
    assert ember.equal(ember.tensor(1.), ember.tensor([1.])) is False
    assert ember.equal(ember.tensor([NAN]), ember.tensor([NAN])) is False
    assert f.equal(f) is True
    with pytest.raises(RuntimeError, match="Float did not match Long"):
        ember.allclose(f, ember.tensor([1, 2, 3]))
    with pytest.raises(RuntimeError, match="must match the size"):
        ember.allclose(f, ember.ones(2))
    with pytest.raises(TypeError, match=r"allclose\(\): argument 'other' \(position 2\) must "
                                        r"be Tensor, not float"):
        ember.allclose(f, 1.)
    with pytest.raises(TypeError, match=r"equal\(\): argument 'other' \(position 2\) must be "
                                        r"Tensor, not int"):
        ember.equal(f, 1)


def test_results_are_not_differentiable():
    f = ember.tensor([1., 2.], requires_grad=True)
    for out in (f < 1, ember.isclose(f, f), ember.logical_not(f), f == f):
        assert out.dtype is ember.bool and not out.requires_grad


def test_isin_compares_in_the_promoted_dtype():
    # a number rounds to a 16-bit float tensor's dtype (and wraps to a narrow integer one)
    assert ember.isin(ember.tensor([0.1], dtype=ember.float16), 0.1).tolist() == [True]
    assert ember.isin(ember.tensor([0.1], dtype=ember.bfloat16), 0.1).tolist() == [True]
    assert ember.isin(ember.tensor([255], dtype=ember.uint8), -1).tolist() == [True]
    assert ember.isin(ember.tensor([3], dtype=ember.int8), ember.tensor(259)).tolist() == [True]
    # two tensors promote as usual: float16 and bfloat16 meet in float32
    half, brain = ember.tensor([0.1], dtype=ember.float16), ember.tensor([0.1],
                                                                         dtype=ember.bfloat16)
    assert ember.isin(half, brain).tolist() == [False]
    assert ember.isin(ember.tensor([255], dtype=ember.uint8),
                      ember.tensor([-1], dtype=ember.int8)).tolist() == [False]
    assert ember.isin(ember.tensor([16777217]), 16777216.0).tolist() == [True]      # float32
    assert ember.isin(ember.tensor([16777217]),
                      ember.tensor([16777216.0], dtype=ember.float64)).tolist() == [False]
    assert ember.isin(16777217, ember.tensor([16777216.0])).tolist() is True


def test_isin_nan_signed_zero_and_forms():
    x = ember.tensor([NAN, -0.0, 1.0])
    assert ember.isin(x, ember.tensor([NAN, 0.0])).tolist() == [False, True, False]
    assert ember.isin(x, ember.tensor([NAN]), invert=True).tolist() == [True, True, True]
    assert ember.isin(elements=x, test_elements=ember.tensor([1.0])).tolist() == \
        [False, False, True]
    assert not hasattr(x, "isin")                       # a function only, as in PyTorch
    with pytest.raises(TypeError):
        ember.isin(x, ember.tensor([1.0]), False)       # assume_unique is keyword-only
    out = ember.empty(0, dtype=ember.bool)
    assert ember.isin(x, 1.0, out=out) is out and out.tolist() == [False, False, True]
    assert not ember.isin(ember.tensor([1., 2.], requires_grad=True), 1.0).requires_grad
