"""uint16/uint32/uint64 as PyTorch's "barebones" dtypes: the ops PyTorch 2.13 refuses raise its
kernel's NotImplementedError; the supported ones compute with PyTorch's result dtypes."""

import numpy as np
import pytest

import ember
from ember.ops._barebones import REFUSED
from ember.ops._registry import REGISTRY

U = (ember.uint16, ember.uint32, ember.uint64)


def _x(dtype):
    return ember.tensor([5, 3, 7], dtype=dtype)


REFUSALS = [
    (lambda x: x + x, "add_stub"),
    (lambda x: x + 2, "add_stub"),
    (lambda x: x.clone().add_(1), "add_stub"),
    (lambda x: x - 1, "add_stub"),
    (lambda x: x % 2, "remainder_cpu"),
    (lambda x: x // 2, "div_floor_cpu"),
    (lambda x: ember.div(x, 2, rounding_mode="trunc"), "div_trunc_cpu"),
    (lambda x: x ** 2, "pow"),
    (lambda x: -x, "neg_cpu"),
    (lambda x: x.abs(), "abs_cpu"),
    (lambda x: x < 4, "lt_cpu"),
    (lambda x: x.max(), "max_all"),
    (lambda x: x.max(0), "max_cpu"),
    (lambda x: x.argmax(), "argmax_cpu"),
    (lambda x: x.clamp(1, 4), "clamp_scalar_cpu"),
    (lambda x: x.clamp(min=1), "clamp_min_scalar_cpu"),
    (lambda x: x.clamp(max=x), "minimum_cpu"),
    (lambda x: x.gather(0, ember.tensor([1, 0])), "scatter_gather_tensor_cpu"),
    (lambda x: x.index_select(0, ember.tensor([1])), "index_select"),
    (lambda x: x.flip(0), "flip_cpu"),
    (lambda x: x.sum(dtype=x.dtype), "sum_cpu"),
    (lambda x: x.masked_fill(ember.tensor([True, False, True]), 0), "masked_fill"),
    (lambda x: ember.dot(x, x), "dot"),
]


@pytest.mark.parametrize("dtype", U)
@pytest.mark.parametrize("i", range(len(REFUSALS)))
def test_refused_like_pytorch(i, dtype):
    fn, kernel = REFUSALS[i]
    with pytest.raises(NotImplementedError) as info:
        fn(_x(dtype))
    assert str(info.value) == f"\"{kernel}\" not implemented for '{dtype._torch_name}'"


def test_setitem_refusal_names_the_kernel_of_the_index():
    x = _x(ember.uint32)
    with pytest.raises(NotImplementedError, match="\"index_put\" not implemented for 'UInt32'"):
        x[ember.tensor([0, 2])] = 1
    with pytest.raises(NotImplementedError, match="\"masked_fill\" not implemented"):
        x[ember.tensor([True, False, True])] = 1
    x[0:2] = 1                          # a basic slice copies: supported
    assert x.tolist() == [1, 1, 7]


@pytest.mark.parametrize("dtype", U)
def test_supported_ops_compute_with_pytorch_dtypes(dtype):
    x = _x(dtype)
    assert (x * 2).tolist() == [10, 6, 14] and (x * 2).dtype is dtype
    assert (x == 3).tolist() == [False, True, False]
    assert (x & 6).tolist() == [4, 2, 6] and (x ^ x).dtype is dtype
    s = x.sum()
    assert s.item() == 15 and s.dtype is ember.int64        # integers sum in int64
    assert x.cumsum(0).tolist() == [5, 8, 15] and x.prod().item() == 105
    assert x.sort().values.tolist() == [3, 5, 7] and x.argsort().tolist() == [1, 0, 2]
    assert ember.unique(x).tolist() == [3, 5, 7]
    y = x + 2.5                         # promoted to float32: computed
    assert y.dtype is ember.float32 and y.tolist() == [7.5, 5.5, 9.5]
    assert (x / 2).tolist() == [2.5, 1.5, 3.5] and (x / 2).dtype is ember.float32
    assert x.clamp(2.5, 6.5).tolist() == [5.0, 3.0, 6.5]
    assert (x ** 1).tolist() == [5, 3, 7] and (x ** 0).tolist() == [1, 1, 1]
    assert ember.cat([x, x]).dtype is dtype and x[ember.tensor([2, 0])].tolist() == [7, 5]
    assert ember.where(ember.tensor([True, False, True]), x, 0).tolist() == [5, 0, 7]
    assert x.to(ember.int64).tolist() == [5, 3, 7] and x.float().dtype is ember.float32
    np.testing.assert_allclose(x.sqrt().numpy(), np.sqrt([5, 3, 7]).astype(np.float32))


def test_promotion_errors_come_before_kernels():
    with pytest.raises(RuntimeError, match="Promotion for uint16, uint32, uint64 types is not "
                                           "supported, attempted to promote UInt32 and Long"):
        _x(ember.uint32) + ember.tensor([1, 2, 3])


def test_every_refused_name_is_a_registered_op():
    assert [n for n in REFUSED if n not in REGISTRY] == []


def test_other_dtypes_are_not_refused():
    for dtype in (ember.uint8, ember.int32, ember.int64, ember.float32):
        x = ember.tensor([5, 3, 7], dtype=dtype)
        assert (x + 1).tolist() == [6, 4, 8] and x.max().item() == 7
        assert x.clamp(4, 6).tolist() == [5, 4, 6] and x.flip(0).tolist() == [7, 3, 5]


def test_index_dtype_is_checked_before_the_kernel():
    x, i = _x(ember.uint32), ember.tensor([2, 0], dtype=ember.uint32)
    with pytest.raises(RuntimeError, match=r"gather\(\): Expected dtype int32/int64 for index"):
        x.gather(0, i)
    with pytest.raises(RuntimeError, match=r"index_select\(\): Expected dtype int32 or int64"):
        x.index_select(0, i)
    with pytest.raises(NotImplementedError, match="\"index_select\" not implemented"):
        x.index_select(0, i.int())
    assert x.take(ember.tensor([], dtype=ember.int64)).tolist() == []   # no kernel runs


@pytest.mark.parametrize("dtype", U)
def test_kernels_skipped_by_pytorch_still_run(dtype):
    m = ember.tensor([[1, 2], [3, 0]], dtype=dtype)
    assert m.reshape(1, 4).flip(0).tolist() == [[1, 2, 3, 0]]         # a size-1 dim
    assert m.flip([]).tolist() == [[1, 2], [3, 0]] and m[0, 0].flip(0).item() == 1
    assert ember.count_nonzero(m, dim=1).tolist() == [2, 1]             # sums m != 0
    assert ember.linalg.matrix_power(m, 1).tolist() == [[1, 2], [3, 0]]
    assert ember.chain_matmul(m).tolist() == [[1, 2], [3, 0]]
    assert ember.nn.functional.pad(m[None], (1, 1), mode="circular").tolist() == \
        [[[2, 1, 2, 1], [0, 3, 0, 3]]]


COMPOSITE_REFUSALS = [
    (lambda m: m.flip(1), "flip_cpu"),
    (lambda m: ember.count_nonzero(m), "nonzero_count_cpu"),
    (lambda m: ember.trapezoid(m), "add_stub"),
    (lambda m: ember.linalg.multi_dot([m, m, m]), "addmm_impl_cpu_"),
    (lambda m: ember.chain_matmul(m, m), "addmm_impl_cpu_"),
    (lambda m: ember.nn.functional.conv1d(m[None, :1], m[:1, None]), "slow_conv2d_cpu"),
    (lambda m: ember.linalg.matrix_power(m, 0), "eye"),
    (lambda m: ember.linalg.matrix_power(m, 2), "addmm_impl_cpu_"),
    (lambda m: ember.linalg.matrix_power(m[None], 2), "bmm"),
    (lambda m: ember.nn.functional.pad(m[None], (1, 1), mode="reflect"), "reflection_pad1d"),
    (lambda m: ember.nn.functional.max_pool1d(m[None], 2, return_indices=True), "max_pool2d"),
    (lambda m: ember.hash_tensor(m), "xor_sum_cpu"),
    (lambda m: ember.nn.functional.hardtanh(m), "clamp_scalar_cpu"),
    (lambda m: ember.lu_unpack(m, ember.tensor([1, 2], dtype=ember.int32)), "tril"),
]


@pytest.mark.parametrize("i", range(len(COMPOSITE_REFUSALS)))
def test_composites_refuse_with_their_first_kernel(i):
    fn, kernel = COMPOSITE_REFUSALS[i]
    with pytest.raises(NotImplementedError) as info:
        fn(ember.tensor([[1, 2], [3, 0]], dtype=ember.uint16))
    assert str(info.value) == f"\"{kernel}\" not implemented for 'UInt16'"


def test_argument_errors_come_before_the_refusal():
    m = ember.tensor([[1, 2], [3, 0]], dtype=ember.uint32)
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied"):
        ember.mm(m[:1], m[:1])
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: "
                                           "unsigned int != float"):
        ember.mm(m, m.float())
    with pytest.raises(RuntimeError, match="tril: input tensor must have at least 2 dim"):
        m[0].clone().tril_()
    with pytest.raises(NotImplementedError, match="\"tril\" not implemented for 'UInt32'"):
        m.clone().tril_()
    x = ember.tensor([5, 3, 7], dtype=ember.uint32)
    with pytest.raises(NotImplementedError) as info:     # PyTorch's kernel checks the range
        x.gather(0, ember.tensor([7]))
    assert type(info.value) is NotImplementedError
