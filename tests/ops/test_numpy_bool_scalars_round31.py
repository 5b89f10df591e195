"""NumPy numbers given where an op takes a Number, as PyTorch 2.13's parser reads them (values
and dtypes recorded from it): a NumPy bool is read as a float (``int_tensor * (np.random.rand()
< p)`` is float32), where a Python bool stays a bool; a NumPy number as the first input of
add/sub/mul/div with no tensor becomes a 0-dim tensor as a Python number does."""

import numpy as np
import pytest

import ember

B, FB = np.bool_(True), np.bool_(False)

CASES = {
    # a NumPy bool: a float Number (a weak float32 beside integral and bool tensors)
    "int_mul": (lambda: ember.tensor([1, 2]) * B, "float32", [1.0, 2.0]),
    "int_add": (lambda: ember.tensor([1, 2]) + FB, "float32", [1.0, 2.0]),
    "rsub": (lambda: B - ember.tensor([1, 2]), "float32", [0.0, -1.0]),
    "bool_mul": (lambda: ember.tensor([True, False]) * B, "float32", [1.0, 0.0]),
    "uint8_pow": (lambda: ember.tensor([1, 2], dtype=ember.uint8) ** B, "float32", [1.0, 2.0]),
    "half_mul": (lambda: ember.tensor([1.5, 2.0], dtype=ember.float16) * B, "float16",
                 [1.5, 2.0]),
    "zero_dim_int": (lambda: ember.tensor(3) * B, "float32", 3.0),
    "where": (lambda: ember.where(ember.tensor([True, False]), ember.tensor([3, 4]), FB),
              "float32", [3.0, 0.0]),
    "clamp_int": (lambda: ember.tensor([1, 2]).clamp(max=B), "float32", [1.0, 1.0]),
    "full": (lambda: ember.full((2,), B), "float32", [1.0, 1.0]),
    "scalar_tensor": (lambda: ember.scalar_tensor(B), "float32", 1.0),
    "mul_numbers": (lambda: ember.mul(B, 2), "float32", 2.0),
    # ops that keep their input's dtype, or make bools, whatever the number
    "full_like_int": (lambda: ember.full_like(ember.ones(2, dtype=ember.int32), B), "int32",
                      [1, 1]),
    "masked_fill": (lambda: ember.tensor([1, 2]).masked_fill(ember.tensor([True, False]), FB),
                    "int64", [0, 2]),
    "fill_bool": (lambda: ember.tensor([True, False]).fill_(FB), "bool", [False, False]),
    "eq": (lambda: ember.tensor([1, 0]) == B, "bool", [True, False]),
    "tensor_data": (lambda: ember.tensor(B), "bool", True),    # data, not a Number
    # a Python bool stays a bool
    "py_int_mul": (lambda: ember.tensor([1, 2]) * True, "int64", [1, 2]),
    "py_bool_mul": (lambda: ember.tensor([True, False]) * True, "bool", [True, False]),
    "py_full": (lambda: ember.full((2,), True), "bool", [True, True]),
    "py_where": (lambda: ember.where(ember.tensor([True, False]), ember.tensor([3, 4]), False),
                 "int64", [3, 0]),
    # other NumPy numbers: their kind, weak
    "np_int_mul": (lambda: ember.tensor([1, 2], dtype=ember.int32) * np.int64(3), "int32",
                   [3, 6]),
    "np_float32_int": (lambda: ember.tensor([1, 2]) * np.float32(1.5), "float32", [1.5, 3.0]),
    "add_np_int_first": (lambda: ember.add(np.int64(3), 2), "int64", 5),
    "mul_np_float_first": (lambda: ember.mul(np.float64(1.5), 2), "float32", 3.0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_numpy_number_dtype_and_value(case):
    fn, dtype, value = CASES[case]
    out = fn()
    assert out.dtype == getattr(ember, dtype)
    assert out.tolist() == value


@pytest.mark.parametrize("fn,message", [
    (lambda: ember.tensor([1, 2]).mul_(B), "result type Float can't be cast to the desired "
                                           "output type Long"),
    (lambda: ember.tensor([True]).add_(FB), "result type Float can't be cast to the desired "
                                            "output type Bool"),
    (lambda: ember.tensor([1, 2]).add(1, alpha=B), "For integral input tensors, argument alpha "
                                                   "must not be a floating point number."),
], ids=["int_mul_", "bool_add_", "int_alpha"])
def test_numpy_bool_in_place_and_alpha_refused_as_a_float(fn, message):
    with pytest.raises(RuntimeError) as err:
        fn()
    assert str(err.value) == message


def test_python_bool_in_place_keeps_integral_dtype():
    x = ember.tensor([1, 2])
    x.mul_(True)
    assert x.dtype == ember.int64 and x.tolist() == [1, 2]
