"""Round 28 fidelity (no PyTorch needed): logsumexp's dim=() error, conv_transpose's parser
errors for string paddings, complex-gradient refusals that in-place forms pass, and the float8
and uint16/32/64 kernels PyTorch's CPU build lacks."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def test_logsumexp_empty_dims_refused_but_keepdim_and_0d_reduce_all():
    x = ember.ones(2, 3)
    with pytest.raises(RuntimeError, match=r"output with shape \[\] doesn't match the "
                                           r"broadcast shape \[1, 1\]"):
        ember.logsumexp(x, ())
    assert ember.logsumexp(x, (), keepdim=True).shape == (1, 1)
    np.testing.assert_allclose(ember.logsumexp(x, (), keepdim=True).numpy(),
                               [[1 + np.log(6.0)]], rtol=1e-6)
    assert ember.logsumexp(ember.tensor(2.0), ()).item() == 2.0


def test_conv_transpose_string_padding():
    m = ember.nn.ConvTranspose1d(2, 2, 5, padding="same")
    assert m.padding == ("s", "a", "m", "e")
    with pytest.raises(TypeError, match=r"^conv_transpose1d\(\): argument 'padding' "
                                        r"\(position 5\) must be tuple of ints, but found "
                                        r"element of type str at pos 0"):
        m(ember.ones(1, 2, 6))
    x, w = ember.ones(1, 2, 6, 6), ember.ones(2, 2, 3, 3)
    with pytest.raises(TypeError, match=r"^conv_transpose2d\(\): argument 'padding' must be "
                                        r"tuple of ints, not tuple$"):
        F.conv_transpose2d(x, w, padding=("s", "a"))
    with pytest.raises(TypeError, match=r"^conv_transpose2d\(\): argument 'groups' must be "
                                        r"int, not str$"):
        F.conv_transpose2d(x, w, groups="s")


def test_complex_grad_refused_out_of_place_only():
    a = ember.tensor([1 + 2j, complex(np.nan, 1)]).requires_grad_()
    for fn, name in ((lambda: a.nan_to_num(), "nan_to_num"),
                     (lambda: F.silu(a), "silu"), (lambda: ember.normal(a, 1.0), "normal")):
        with pytest.raises(RuntimeError, match=f"^{name} does not support automatic "
                                               f"differentiation for outputs with complex"):
            fn()
    out = (a * 1).nan_to_num_()
    assert out.grad_fn is not None
    np.testing.assert_array_equal(out.detach().numpy(), [1 + 2j, 0j])


@pytest.mark.parametrize("call,kernel", [
    (lambda x: x.flip(1), "flip_cpu"), (lambda x: x.triu(), "triu"),
    (lambda x: x.masked_fill(ember.tensor([True, False]), 1.0), "masked_fill"),
    (lambda x: x.take(ember.tensor([0])), "take_cpu"),
    (lambda x: x.gather(0, ember.zeros(1, 2, dtype=ember.long)), "scatter_gather_tensor_cpu"),
    (lambda x: x.scatter(0, ember.zeros(1, 2, dtype=ember.long), 1.0),
     "scatter_gather_scalar_cpu"),
    (lambda x: x.nonzero(), "nonzero_count_cpu"), (lambda x: x.logical_not(), "logical_not_cpu"),
    (lambda x: ember.equal(x, x), "equal_notnan_cpu"),
    (lambda x: x.sort(), "sorting_kernel_method_name")])
def test_float8_kernels_refused(call, kernel):
    x = ember.ones(2, 2).to(ember.float8_e4m3fn)
    with pytest.raises(NotImplementedError, match=f"^\"{kernel}\" not implemented for "
                                                  f"'Float8_e4m3fn'$"):
        call(x)


def test_float8_row_copies_still_work():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]]).to(ember.float8_e4m3fn)
    assert x.flip(0).float().tolist() == [[3.0, 4.0], [1.0, 2.0]]
    assert x.t().flip(1).float().tolist() == [[3.0, 1.0], [4.0, 2.0]]
    assert ember.equal(x, x.clone())
    assert ember.count_nonzero(x, 0).tolist() == [2, 2]


@pytest.mark.parametrize("call,kernel", [(lambda u: u >> 16, "rshift_cpu"),
                                         (lambda u: u << 1, "lshift_cpu"),
                                         (lambda u: ~u, "bitwise_not_cpu"),
                                         (lambda u: u.logical_and(u), "logical_and_cpu")])
def test_wide_unsigned_kernels_refused(call, kernel):
    u = ember.tensor([1 << 20, 5], dtype=ember.uint32)
    with pytest.raises(NotImplementedError, match=f"^\"{kernel}\" not implemented for "
                                                  f"'UInt32'$"):
        call(u)
    assert (u & 3).tolist() == [0, 1]
