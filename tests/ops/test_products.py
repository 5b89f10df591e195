"""Products beyond the OpInfo checks: einsum's call forms, dtypes and contraction order,
multi_dot's order, the wrappers' errors, chain_matmul's warning, and PyTorch's quirks of
the add* products (each expectation checked against PyTorch 2.13)."""

import warnings

import numpy as np
import pytest

import ember
from ember.ops.contractions import chain_order
from ember.ops.einsum import parse, plan

NAN = float("nan")


# --- einsum -----------------------------------------------------------------------------------

def test_einsum_call_forms():
    a = ember.arange(6.0).reshape(2, 3)
    b = ember.arange(12.0).reshape(3, 4)
    expected = (a @ b).tolist()
    assert ember.einsum("ij,jk->ik", a, b).tolist() == expected
    assert ember.einsum("ij,jk->ik", [a, b]).tolist() == expected
    assert ember.einsum("ij,jk", (a, b)).tolist() == expected
    assert ember.einsum(a, [0, 1], b, [1, 2], [0, 2]).tolist() == expected
    assert ember.einsum(a, [0, 1], b, [1, 2]).tolist() == expected
    assert ember.einsum(a, [..., 1], [...]).tolist() == a.sum(1).tolist()
    assert ember.einsum.__doc__.startswith("Sums of products")


@pytest.mark.parametrize("args,error,match", [
    (("ij",), ValueError, "must specify the equation string and at least one operand"),
    (("ij", []), ValueError, "must specify the equation string"),
    ((3, ember.ones(2)), TypeError, r"argument 'equation' \(position 1\) must be str, not int"),
    (("i,i", ember.ones(2), [ember.ones(2)]), TypeError,
     "expected Tensor as element 1 in argument 1, but got list"),
    ((ember.ones(2, 3), [0, 52]), ValueError,
     r"subscript in subscript list is not within the valid range \[0, 52\)"),
])
def test_einsum_call_errors(args, error, match):
    with pytest.raises(error, match=match):
        ember.einsum(*args)


def test_einsum_implicit_output_is_sorted_upper_case_first_after_the_ellipsis():
    assert parse("Ba,ab", (2, 2)).output == (1, 27)                    # B, b
    assert ember.einsum("b,...a", ember.ones(4), ember.ones(5, 2, 3)).shape == (5, 2, 3, 4)


@pytest.mark.parametrize("equation,shapes,dtypes,expected", [
    ("ij->i", [(2, 1)], ("int32",), "int64"),          # a sum: integers widen
    ("ii->i", [(3, 3)], ("bool",), "bool"),            # a diagonal only
    ("i,j->ij", [(2,), (3,)], ("float32", "float64"), "float64"),   # a product promotes
    ("ij,jk->ik", [(2, 3), (1, 4)], ("int32", "int32"), "int64"),   # j summed in one operand
    ("ij,jk->ik", [(2, 1), (1, 4)], ("bool", "bool"), "bool"),      # size-1 j: a product
    ("i,i->", [(0,), (0,)], ("int64", "int32"), "int32"),           # an empty bmm
])
def test_einsum_result_dtype_follows_pytorch(equation, shapes, dtypes, expected):
    ops = [ember.ones(s, dtype=getattr(ember, d)) for s, d in zip(shapes, dtypes)]
    assert ember.einsum(equation, *ops).dtype is getattr(ember, expected)


@pytest.mark.parametrize("equation,shapes,dtypes,error,match", [
    ("ij,jk->k", [(2, 3), (3, 4)], ("int32", "int32"), RuntimeError,
     "expected scalar type Long but found Int"),       # i summed out of operand 0 first
    ("i,i->", [(3,), (3,)], ("float32", "float64"), RuntimeError,
     "expected scalar type Float but found Double"),
    ("ij,jk", [(2, 3), (3, 4)], ("bool", "int32"), NotImplementedError,
     "\"bmm\" not implemented for 'Bool'"),
])
def test_einsum_dtype_errors_follow_pytorch(equation, shapes, dtypes, error, match):
    ops = [ember.ones(s, dtype=getattr(ember, d)) for s, d in zip(shapes, dtypes)]
    with pytest.raises(error, match=match):
        ember.einsum(equation, *ops)


def test_einsum_contracts_the_cheapest_pair_first():
    shapes = ((50, 2), (2, 50), (50, 3))
    p = plan("ij,jk,kl->il", shapes, (np.dtype(np.float64),) * 3)
    assert [(s.i, s.j) for s in p.pairs] == [(1, 2), (0, 1)]     # (jk,kl) first: 2x3
    ops = [ember.randn(s, dtype=ember.float64) for s in shapes]
    want = np.asarray(ops[0]) @ np.asarray(ops[1]) @ np.asarray(ops[2])
    np.testing.assert_allclose(np.asarray(ember.einsum("ij,jk,kl->il", *ops)), want)


def test_einsum_matches_numpy_on_repeated_and_broadcast_labels():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((3, 3, 2)), rng.standard_normal((1, 2))
    got = ember.einsum("iij,kj->ik", ember.tensor(x), ember.tensor(y))
    np.testing.assert_allclose(np.asarray(got), np.einsum("iij,kj->ik", x, y))


def test_einsum_gradient_of_a_trace_is_the_identity():
    x = ember.randn(3, 3, requires_grad=True)
    ember.einsum("ii", x).backward()
    assert x.grad.tolist() == ember.eye(3).tolist()


def test_einsum_16_bit_computes_in_float32():
    big = ember.tensor([1024.0] + [0.25] * 4, dtype=ember.float16)
    out = ember.einsum("i,i->", big, ember.ones(5, dtype=ember.float16))
    assert out.dtype is ember.float16 and out.item() == 1025.0


# --- tensordot, multi_dot, chain_matmul -------------------------------------------------------

@pytest.mark.parametrize("dims,match", [([1], r"not enough values to unpack \(expected 2, got 1\)"),
                                        ([[0], [1], [2]], r"too many values to unpack")])
def test_tensordot_dims_of_the_wrong_length(dims, match):
    with pytest.raises(ValueError, match=match):
        ember.tensordot(ember.ones(2, 3), ember.ones(3, 2), dims=dims)


def test_tensordot_out():
    out = ember.empty(0)
    a, b = ember.ones(2, 3), ember.ones(3, 4)
    assert ember.tensordot(a, b, dims=1, out=out) is out
    assert out.tolist() == [[3.0] * 4] * 2
    assert not hasattr(ember.Tensor, "tensordot") and not hasattr(ember.Tensor, "einsum")


def test_multi_dot_order_is_the_cheapest():
    # (10x30)(30x5)(5x60): (AB)C costs 4500 multiplications, A(BC) 27000
    assert chain_order([(10, 30), (30, 5), (5, 60)])[0][2] == 1
    assert chain_order([(50, 10), (10, 40), (40, 30), (30, 5)])[0][3] == 0   # A(B(CD))


def test_chain_matmul_warns_and_keeps_pytorch_errors():
    a, b = ember.ones(2, 3), ember.ones(3, 4)
    with pytest.warns(UserWarning, match="chain_matmul is deprecated") as caught:
        assert ember.chain_matmul(a, b).tolist() == [[3.0] * 4] * 2
    assert caught[0].filename == __file__
    out = ember.empty(0)
    with pytest.warns(UserWarning):
        assert ember.chain_matmul(a, b, ember.ones(4, 1), out=out) is out
    assert out.tolist() == [[12.0], [12.0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        single = ember.chain_matmul(a)              # one matrix: a copy, no warning
    assert single.tolist() == a.tolist() and single._data is not a._data
    with pytest.raises(RuntimeError, match=r"chain_matmul\(\): Expected one or more matrices"):
        ember.chain_matmul()
    with pytest.raises(TypeError, match="expected Tensor as element 0 in argument 0, but got list"):
        ember.chain_matmul([a, b])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="Tensor dimension is 1, expected 2 instead."):
            ember.chain_matmul(a, ember.ones(3))
        with pytest.raises(RuntimeError, match="multi_dot\\(\\): all tensors must have be the "
                                               "same dtype but tensor 0 is float and tensor 1 "
                                               "double"):
            ember.chain_matmul(a, ember.ones(3, 4, dtype=ember.float64))


# --- the add* products ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
def test_16_bit_products_read_the_operands_even_when_alpha_is_0(dtype):
    nan = ember.full((2, 3), NAN, dtype=dtype)
    assert ember.addmm(ember.ones(2, 2, dtype=dtype), nan, ember.ones(3, 2, dtype=dtype),
                       alpha=0).isnan().all()
    # 32-bit floats go through BLAS, which never reads them
    assert ember.addmm(ember.ones(2, 2), nan.float(), ember.ones(3, 2), alpha=0).tolist() == \
        [[1.0, 1.0], [1.0, 1.0]]


def test_beta_0_ignores_nan_and_inf_in_input():
    for fill in (NAN, float("inf")):
        m = ember.full((2, 2), fill)
        out = ember.addmm(m, ember.ones(2, 3), ember.ones(3, 2), beta=0)
        assert out.tolist() == [[3.0, 3.0], [3.0, 3.0]]
        assert ember.addr(m, ember.ones(2), ember.ones(2), beta=0.0).tolist() == \
            [[1.0, 1.0], [1.0, 1.0]]


def test_float_scales_truncate_for_integer_products_but_not_for_addr():
    one = ember.ones(2, 2, dtype=ember.int64)
    assert ember.addmm(one, one, one, beta=1.5, alpha=2.7).tolist() == [[5, 5], [5, 5]]
    with pytest.raises(RuntimeError, match="argument alpha must not be a floating point"):
        ember.addr(one, one[0], one[0], alpha=2.7)


def test_in_place_and_methods():
    x = ember.zeros(2, 2)
    assert x.addmm_(ember.ones(2, 3), ember.ones(3, 2), alpha=2) is x
    assert x.tolist() == [[6.0, 6.0], [6.0, 6.0]]
    for name in ("addmm_", "addmv_", "addr_", "baddbmm_", "addbmm_", "kron", "inner", "vdot"):
        assert hasattr(ember.Tensor, name), name
    # PyTorch's addbmm_ resizes a broadcastable self to [2, 4]; ember raises like addmm_
    with pytest.raises(RuntimeError):
        ember.ones(4).addbmm_(ember.ones(3, 2, 3), ember.ones(3, 3, 4))


def test_addr_on_bools_is_and_or():
    m = ember.tensor([[True, False]])
    u, v = ember.tensor([True]), ember.tensor([False, True])
    assert ember.addr(m, u, v).tolist() == [[True, True]]
    assert ember.addr(m, u, v, beta=False).tolist() == [[False, True]]
    assert ember.addr(m, u, v, alpha=0).tolist() == [[True, False]]


def test_gradients_use_conjugates():
    m = ember.zeros(2, 2, dtype=ember.complex64)
    a = ember.tensor([[1 + 1j, 2j], [3.0, 1 - 1j]], requires_grad=True)
    b = ember.tensor([[1j, 0], [1.0, 2 - 1j]])
    ember.addmm(m, a, b, alpha=1j).abs().sum().backward()
    out = (1j * (a.detach() @ b))
    g = out / out.abs()                         # d|z|/dz* direction
    want = (g @ b.mH) * (-1j)
    # complex64: the two sides round differently (BLAS kernels vary by machine)
    np.testing.assert_allclose(np.asarray(a.grad), np.asarray(want), rtol=1e-6)


def test_einsum_of_one_operand_does_not_alias_it():
    x = ember.zeros(3, 3)
    for equation in ("ij", "ji", "ii->i"):
        y = ember.einsum(equation, x)
        y += 1
        assert x.sum().item() == 0, equation


@pytest.mark.parametrize("equation, shapes", [
    ("ncl,ncl->c", ((3, 4, 5), (3, 4, 5))),          # batch-norm's per-channel dot
    ("ij,ij->", ((4, 6), (4, 6))),
    ("bij,bij->bi", ((2, 3, 4), (2, 3, 4))),
])
def test_einsum_batched_dots_match_numpy_and_differentiate(equation, shapes):
    """Pairs that contract every label they do not share with the output run as one NumPy
    sum of products; values and gradients stay those of the definition."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    tensors = [ember.tensor(a, requires_grad=True) for a in arrays]
    out = ember.einsum(equation, *tensors)
    np.testing.assert_allclose(out.detach().numpy(), np.einsum(equation, *arrays), rtol=1e-12)
    out.sum().backward()
    np.testing.assert_allclose(tensors[0].grad.numpy(), arrays[1], rtol=1e-12)
    assert ember.autograd.gradgradcheck(lambda a, b: ember.einsum(equation, a, b), tensors)
