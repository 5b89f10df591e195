"""dtype rules found by running every op over a dtype matrix against PyTorch: rounding
division has no bool or complex kernel, in-place ops check the cast before the kernel, bool
pow, and the dtypes the pointwise losses compute and return in."""

import pytest

import ember

F = ember.nn.functional
B = ember.tensor([True, False, True])
C = ember.tensor([1 + 2j, 3 - 1j])
INTS = ember.tensor([5, -7])


@pytest.mark.parametrize("fn, kernel, dtype", [
    (lambda: ember.floor_divide(C, C), "div_floor_cpu", "ComplexFloat"),
    (lambda: ember.floor_divide(B, B), "div_floor_cpu", "Bool"),
    (lambda: C // 2, "div_floor_cpu", "ComplexFloat"),
    (lambda: ember.remainder(C, C), "remainder_cpu", "ComplexFloat"),
    (lambda: ember.remainder(B, B), "remainder_cpu", "Bool"),
    (lambda: ember.fmod(C.to(ember.complex128), 2), "fmod_cpu", "ComplexDouble"),
    (lambda: ember.fmod(B, B), "fmod_cpu", "Bool"),
    (lambda: ember.div(C, C, rounding_mode="floor"), "div_floor_cpu", "ComplexFloat"),
    (lambda: ember.div(C, C, rounding_mode="trunc"), "div_trunc_cpu", "ComplexFloat"),
    (lambda: ember.div(B, B, rounding_mode="trunc"), "div_trunc_cpu", "Bool"),
])
def test_rounding_division_rejects_bool_and_complex(fn, kernel, dtype):
    with pytest.raises(NotImplementedError, match=f"\"{kernel}\" not implemented for '{dtype}'"):
        fn()


def test_true_division_of_bool_still_works():
    assert ember.div(B, B).tolist()[0] == 1.0
    assert ember.fmod(INTS, True).tolist() == [0, 0]


@pytest.mark.parametrize("fn, result", [
    (lambda: INTS.clone().floor_divide_(1j), "ComplexFloat can't be cast to the desired output "
                                          "type Long"),
    (lambda: ember.tensor([1.5, 2.5]).remainder_(C), "ComplexFloat can't be cast to the "
                                                     "desired output type Float"),
    (lambda: ember.tensor([1.5, 2.5]).clamp_(C), "ComplexFloat can't be cast to the desired "
                                                 "output type Float"),
])
def test_inplace_checks_the_cast_before_the_kernel(fn, result):
    with pytest.raises(RuntimeError, match=f"result type {result}"):
        fn()


def test_inplace_kernel_error_when_the_cast_is_fine():
    with pytest.raises(NotImplementedError, match="fmod_cpu"):
        B.clone().fmod_(B)
    assert B.clone().ge_(ember.tensor([0.5, 0.5, 2.0])).tolist() == [True, False, False]


def test_bool_pow():
    assert ember.pow(B, True).dtype == ember.bool
    assert ember.pow(B, True).tolist() == [True, False, True]
    assert ember.pow(B, False).tolist() == [True, True, True]
    assert B.clone().pow_(True).tolist() == [True, False, True]
    assert ember.pow(B, 2).dtype == ember.int64
    for fn in (lambda: ember.pow(B, B), lambda: ember.pow(True, B),
               lambda: B ** ember.tensor(True)):
        with pytest.raises(NotImplementedError, match="\"pow\" not implemented for 'Bool'"):
            fn()


X = ember.tensor([[0.0, 1.5, 2.0], [3.0, -1.25, 5.0]])


def test_mse_and_smooth_l1_take_integer_and_bool_targets():
    t = ember.tensor([[2, 1, -3], [1, 4, 2]])
    assert F.mse_loss(X, t).item() == pytest.approx(11.6354166, rel=1e-6)
    assert F.mse_loss(t, X).dtype == ember.float32
    assert F.mse_loss(X, t != 0).item() == pytest.approx(4.5520833, rel=1e-6)
    assert F.smooth_l1_loss(X, t != 0).item() == pytest.approx(1.3125, rel=1e-6)
    with pytest.raises(NotImplementedError, match="\"mse_cpu\" not implemented for 'Long'"):
        F.mse_loss(t, t)


def test_huber_and_soft_margin_return_the_input_dtype():
    t = ember.tensor([[2.0, 0.5, -3.0], [1.0, 4.0, 2.5]])
    h = F.huber_loss(X.half(), t)
    assert h.dtype == ember.float16
    assert h.item() == pytest.approx(2.458, abs=2e-3)
    assert F.soft_margin_loss(X.half(), t).dtype == ember.float16
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        F.huber_loss(t.long(), t)


def test_soft_margin_loss_with_unsigned_target_does_not_wrap():
    t = ember.tensor([[2, 1, 3], [1, 4, 2]], dtype=ember.uint8)
    assert F.soft_margin_loss(X, t).item() == pytest.approx(0.99213, abs=1e-4)
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor"):
        F.soft_margin_loss(X != 0, X)
