"""Matrix products beyond the OpInfo checks: operators, precision, aliases, integer overflow."""

import numpy as np
import pytest

import ember


def test_matmul_operator():
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    v = ember.tensor([1.0, -1.0])
    assert (a @ v).tolist() == [-1.0, -1.0]
    assert (v @ a).tolist() == [-2.0, -2.0]
    assert (v @ v).shape == () and (v @ v).item() == 2.0
    assert (a @ a).tolist() == [[7.0, 10.0], [15.0, 22.0]]
    assert v.__rmatmul__(a).tolist() == [-1.0, -1.0]
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for @: 'Tensor' and 'int'"):
        a @ 2       # (matmul refuses the int; the operator returns NotImplemented, as PyTorch's)


@pytest.mark.parametrize("dtype,big,quarters", [(ember.float16, 1024, 4),
                                                (ember.bfloat16, 256, 8)])
def test_16_bit_products_accumulate_in_float32(dtype, big, quarters):
    # big + 0.25 rounds back to big in 16 bits; summed in float32 the total is exact
    row = ember.tensor([[float(big)] + [0.25] * quarters], dtype=dtype)
    col = ember.ones(quarters + 1, 1, dtype=dtype)
    total = big + quarters / 4
    assert ember.mm(row, col).item() == total
    assert ember.matmul(row[0], col[:, 0]).item() == total
    assert ember.mv(row, col[:, 0]).item() == total
    assert ember.bmm(row[None], col[None]).item() == total
    assert ember.mm(row, col).dtype is dtype


def test_integer_products_wrap_like_pytorch():
    a = ember.ones(2, 300, dtype=ember.int8)
    assert ember.mm(a, a.t()).tolist() == [[44, 44], [44, 44]]     # 300 mod 256
    big = ember.tensor([[2 ** 40]], dtype=ember.int64)
    assert ember.mm(big, big).item() == 0                             # 2**80 mod 2**64
    assert ember.matmul(ember.tensor([1, 2, 3]), ember.tensor([4, 5, 6])).item() == 32


def test_complex_products_do_not_conjugate():
    a = ember.tensor([1 + 1j, 2 - 1j])
    assert ember.dot(a, a).item() == (1 + 1j) ** 2 + (2 - 1j) ** 2
    w = ember.tensor([[1 + 2j, 0], [0, 1j]], requires_grad=True)
    (w @ a).abs().sum().backward()
    assert w.grad.dtype is ember.complex64


def test_outer_promotes_and_has_the_ger_alias():
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    b = ember.tensor([3, 4, 5])
    out = ember.outer(a, b)
    assert out.dtype is ember.float32
    assert out.tolist() == [[3.0, 4.0, 5.0], [6.0, 8.0, 10.0]]
    out.sum().backward()
    assert a.grad.tolist() == [12.0, 12.0]
    assert ember.ger._ember_op is ember.outer._ember_op and ember.Tensor.ger.__name__ == "ger"
    flags = ember.outer(ember.tensor([True]), ember.tensor([True, False]))
    assert flags.tolist() == [[True, False]]


def test_batched_matmul_gradient_sums_broadcast_dims():
    rng = np.random.default_rng(0)
    a_np, b_np = rng.standard_normal((4, 1, 2, 3)), rng.standard_normal((5, 3, 2))
    a = ember.tensor(a_np, requires_grad=True)
    b = ember.tensor(b_np, requires_grad=True)
    (a @ b).sum().backward()
    ones = np.ones((4, 5, 2, 2))
    np.testing.assert_allclose(np.asarray(a.grad), (ones @ b_np.swapaxes(-1, -2)).sum(
        1, keepdims=True))
    np.testing.assert_allclose(np.asarray(b.grad), (a_np.swapaxes(-1, -2) @ ones).sum(0))


def test_matmul_assignment_operator_rebinds():
    a = ember.ones(2, 3)
    a @= ember.ones(3, 2)
    assert a.shape == (2, 2)
