"""Numbers and 0-dim tensors beside float16/bfloat16 tensors on the CPU, as PyTorch's CPU
kernels read them (NOTE [Scalars beside 16-bit floats] in ops/_dispatch.py): rounded to
the 16-bit dtype, except mul's and div's second operand and lerp's number weight; and the
Number parameters PyTorch converts to the op's dtype (or to float32), range-checked."""

import pytest

import ember
import ember.nn.functional as F

bf16, half = ember.bfloat16, ember.float16


def _item(t):
    return t.float().item()


def test_a_number_is_rounded_to_float16_before_adding():
    x = ember.tensor([-65504.0], dtype=half)        # 70000 is inf in float16
    assert _item(x + 70000.0) == float("inf")
    assert _item(70000.0 + x) == float("inf")
    assert _item(x.clone().add_(70000.0)) == float("inf")
    assert _item(x + ember.tensor(70000.0)) == float("inf")      # a float32 0-dim tensor


def test_comparisons_see_the_rounded_number():
    x = ember.tensor([256.0], dtype=bf16)           # 257 is 256 in bfloat16
    assert (x < 257).item() is False
    assert (x == 257.0).item() is True
    assert (257 > x).item() is False
    assert (x < ember.tensor(257.0)).item() is False


def test_mul_and_div_read_their_second_operand_in_float32():
    x = ember.tensor([255.0], dtype=bf16)
    assert _item(x * 3.0078125) == 768.0            # 255 * 3.0078125, rounded once
    assert _item(3.0078125 * x) == 768.0            # (PyTorch computes x * 3.0078125)
    assert _item(x * ember.tensor(3.0078125)) == 768.0
    assert _item(ember.tensor(3.0078125) * x) == 764.0     # first: rounded to 3, 255 * 3
    assert _item(ember.tensor([1.0], dtype=bf16) / 3.0078125) == 0.33203125
    assert _item(ember.tensor([9.0], dtype=bf16) // 3.0078125) == 2.0


def test_other_ops_round_the_number():
    three = ember.tensor([3.0], dtype=bf16)         # 3.0078125 is 3 in bfloat16
    assert _item(ember.fmod(three, 3.0078125)) == 0.0
    assert _item(ember.remainder(three, 3.0078125)) == 0.0
    assert _item(three - 3.0078125) == 0.0
    assert _item(3.0078125 ** three) == 27.0
    assert _item(ember.atan2(ember.tensor([1.0], dtype=bf16), ember.tensor(3.0078125))) == \
        0.322265625


def test_a_number_over_a_tensor_is_its_reciprocal_times_the_number():
    # PyTorch's number / tensor: the reciprocal, rounded, then multiplied
    assert _item(3.0078125 / ember.tensor([3.0], dtype=bf16)) == 1.0078125
    x = ember.ones(3, requires_grad=True)
    y = 2.0 / x
    assert y.grad_fn.name() == "MulBackward0"
    assert y.grad_fn.next_functions[0][0].name() == "ReciprocalBackward0"
    y.sum().backward()
    assert x.grad.tolist() == [-2.0, -2.0, -2.0]


def test_a_number_times_a_tensor_records_the_tensor_first():
    x = ember.ones(3, requires_grad=True)
    functions = (2.0 * x).grad_fn.next_functions
    assert functions[0][0].variable is x and functions[1][0] is None


def test_float32_compares_with_the_number_in_float32():
    x = ember.tensor([16777216.0])                  # 2**24 + 1 is 2**24 in float32
    assert (x < 16777217).item() is False
    assert (x.double() < 16777217).item() is True


@pytest.mark.parametrize("call, dtype_name", [
    (lambda: F.hardtanh(ember.ones(2, dtype=half), -1.0, 70000.0), "c10::Half"),
    (lambda: F.hardshrink(ember.ones(2, dtype=half), 70000.0), "c10::Half"),
    (lambda: F.threshold(ember.ones(2, dtype=bf16), 1.0, 1e39), "c10::BFloat16"),
    (lambda: ember.add(ember.ones(2, dtype=half), 1.0, alpha=70000.0), "c10::Half"),
    (lambda: ember.sub(ember.ones(2, dtype=half), 1.0, alpha=70000.0), "c10::Half"),
    (lambda: ember.logit(ember.ones(2, dtype=half), 70000.0), "c10::Half"),
    (lambda: F.leaky_relu(ember.ones(2), 1e39), "float"),
    (lambda: F.leaky_relu(ember.ones(2, dtype=bf16), 1e39), "float"),
    (lambda: F.elu(ember.ones(2), 1e39), "float"),
    (lambda: F.celu(ember.ones(2), 3.5e38), "float"),
    (lambda: F.softplus(ember.ones(2), 1.0, 1e39), "float"),
    (lambda: F.threshold(ember.ones(2), 1e39, 1.0), "float"),
    (lambda: F.hardtanh(ember.ones(2), -1e39, 1.0), "float"),
])
def test_number_parameters_must_fit_the_type_they_are_converted_to(call, dtype_name):
    with pytest.raises(RuntimeError, match=f"value cannot be converted to type {dtype_name} "
                                           f"without overflow"):
        call()


def test_a_16_bit_op_rounds_its_dtype_parameters():
    x = ember.tensor([300.0, -300.0], dtype=bf16)
    # 257 is 256 in bfloat16: the clamp's bound, as PyTorch converts it
    assert F.hardtanh(x, -257.0, 257.0).float().tolist() == [256.0, -256.0]
    assert F.leaky_relu(ember.ones(2, dtype=half), 70000.0).dtype is half    # float32 fits


def test_softshrink_names_the_range_of_the_dtype():
    with pytest.raises(RuntimeError, match=r"lambda must be in range \[0, 65504\] for input "
                                           r"dtype Half, but found 70000"):
        F.softshrink(ember.ones(2, dtype=half), 70000.0)
