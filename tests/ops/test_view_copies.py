"""The ``*_copy`` functions (ember/ops/view_copies.py): values, fresh contiguous memory,
gradients and ``out=``. Expected values were checked against PyTorch 2.13."""

import warnings

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck
from ember.ops.view_copies import (PUBLIC, alias_copy, detach_copy, diagonal_copy, expand_copy,
                                   permute_copy, select_copy, slice_copy, split_copy,
                                   split_with_sizes_copy, squeeze_copy, t_copy, transpose_copy,
                                   unbind_copy, unfold_copy, unsqueeze_copy,
                                   view_as_complex_copy, view_as_real_copy, view_copy)

F64 = ember.float64


def _x(*shape, requires_grad=False):
    n = int(np.prod(shape))
    return ember.arange(float(n), dtype=F64).reshape(shape).requires_grad_(requires_grad)


# (function, extra arguments, the view it copies); each on a 2 x 3 x 4 input
ONE = [
    ("alias_copy", (), lambda x: x),
    ("detach_copy", (), lambda x: x),
    ("diagonal_copy", (1, 0, 2), lambda x: x.diagonal(1, 0, 2)),
    ("expand_copy", ((5, 2, 3, 4),), lambda x: x.expand(5, 2, 3, 4)),
    ("permute_copy", ((2, 0, 1),), lambda x: x.permute(2, 0, 1)),
    ("select_copy", (1, -1), lambda x: x.select(1, -1)),
    ("slice_copy", (2, 1, None, 2), lambda x: x[:, :, 1::2]),
    ("squeeze_copy", (), lambda x: x),
    ("transpose_copy", (0, 2), lambda x: x.transpose(0, 2)),
    ("unfold_copy", (2, 2, 1), lambda x: x.unfold(2, 2, 1)),
    ("unsqueeze_copy", (-2,), lambda x: x.unsqueeze(-2)),
    ("view_copy", ((4, -1),), lambda x: x.reshape(4, 6)),
]
SEVERAL = [
    ("split_copy", (2, 2), lambda x: x.split(2, 2)),
    ("split_with_sizes_copy", ([1, 3], 2), lambda x: x.split([1, 3], 2)),
    ("unbind_copy", (1,), lambda x: x.unbind(1)),
]


def _shares(a, b):
    return np.shares_memory(np.asarray(a.detach()), np.asarray(b.detach()))


@pytest.mark.parametrize("name, args, view", ONE, ids=[c[0] for c in ONE])
def test_one_result_is_a_contiguous_copy(name, args, view):
    x = _x(2, 3, 4)
    got = PUBLIC[name](x, *args)
    want = view(x)
    assert got.shape == want.shape and got.dtype == F64
    assert got.tolist() == want.tolist()
    assert got.is_contiguous() and not _shares(got, x) and got._base is None
    got.add_(1)                                  # writing the copy leaves the input alone
    assert x.tolist() == _x(2, 3, 4).tolist()


@pytest.mark.parametrize("name, args, view", SEVERAL, ids=[c[0] for c in SEVERAL])
def test_several_results_are_contiguous_copies(name, args, view):
    x = _x(2, 3, 4)
    got, want = PUBLIC[name](x, *args), view(x)
    assert type(got) is tuple and len(got) == len(want)
    for g, w in zip(got, want):
        assert g.tolist() == w.tolist() and g.is_contiguous() and not _shares(g, x)


def test_strides_are_row_major():
    x = _x(2, 3)
    assert t_copy(x).stride() == (2, 1)                             # t() has (1, 3)
    assert expand_copy(x, (4, 2, 3)).stride() == (6, 3, 1)          # expand has 0
    assert permute_copy(x, (1, 0)).tolist() == [[0, 3], [1, 4], [2, 5]]
    assert transpose_copy(x, 0, 1).stride() == (2, 1)


def test_values_of_the_small_cases():
    x = _x(2, 3)
    assert t_copy(ember.arange(4.0)).tolist() == [0, 1, 2, 3]
    assert diagonal_copy(x).tolist() == [0, 4]
    assert diagonal_copy(x, -1).tolist() == [3]
    assert select_copy(x, 0, 1).tolist() == [3, 4, 5]
    assert slice_copy(x, 1, -5, 100).tolist() == x.tolist()         # bounds are clamped
    assert slice_copy(x, 1, 5, 1).shape == (2, 0)
    assert slice_copy(x, step=2).tolist() == [[0, 1, 2]]
    assert slice_copy(ember.zeros(0)).shape == (0,)
    assert squeeze_copy(ember.zeros(1, 2, 1), (0, 2)).shape == (2,)
    assert squeeze_copy(ember.zeros(1, 2, 1), dim=0).shape == (2, 1)
    assert unfold_copy(ember.tensor(2.0), 0, 1, 1).tolist() == [2.0]
    assert view_copy(x.t(), (6,)).tolist() == [0, 3, 1, 4, 2, 5]    # reshapes any strides
    assert view_copy(input=x, size=(3, 2)).shape == (3, 2)
    assert [t.tolist() for t in split_copy(x, 2, 1)] == [[[0, 1], [3, 4]], [[2], [5]]]


def test_complex_views():
    z = ember.tensor([[1 + 2j, 3 - 4j]], dtype=ember.complex64)
    r = view_as_real_copy(z)
    assert r.dtype == ember.float32 and r.tolist() == [[[1, 2], [3, -4]]]
    assert r.stride() == (4, 2, 1) and not _shares(r, z)
    c = view_as_complex_copy(ember.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=F64))
    assert c.dtype == ember.complex128 and c.tolist() == [1 + 2j, 3 + 4j]


def test_view_copy_to_a_dtype_reads_the_bytes():
    x = ember.tensor([1.0, -2.0], dtype=ember.float32)
    assert view_copy(x, ember.int32).tolist() == [1065353216, -1073741824]
    assert view_copy(x, dtype=ember.int32).dtype == ember.int32
    h = view_copy(x, ember.float16)
    assert h.shape == (4,) and h.tolist() == [0.0, 1.875, 0.0, -2.0]
    assert view_copy(ember.ones(2, 4), ember.float64).shape == (2, 2)
    assert view_copy(x, ember.bool).shape == (8,)
    assert view_copy(ember.ones(2, 2).t(), ember.int32).tolist() == [[1065353216] * 2] * 2
    y = ember.ones(2, requires_grad=True)
    assert not view_copy(y, ember.float32).requires_grad            # never differentiable


@pytest.mark.parametrize("name, args, view", ONE[:2] + ONE[3:], ids=[c[0] for c in ONE[:2]
                                                                      + ONE[3:]])
def test_one_result_gradients(name, args, view):
    if name == "detach_copy":
        return
    x = _x(2, 3, 4, requires_grad=True) / 7
    assert gradcheck(lambda t: PUBLIC[name](t, *args), (x,))
    assert gradgradcheck(lambda t: PUBLIC[name](t, *args), (x,))


def test_gradients_of_the_rest():
    x = (_x(3, 3, requires_grad=True) / 5).detach().requires_grad_()
    assert gradcheck(lambda t: diagonal_copy(t, 1), (x,))
    assert gradcheck(lambda t: split_copy(t, 2, 1), (x,))
    assert gradcheck(lambda t: split_with_sizes_copy(t, [2, 1]), (x,))
    assert gradcheck(lambda t: unbind_copy(t, 1), (x,))
    assert gradcheck(lambda t: t_copy(t), (x,))
    assert gradcheck(view_as_real_copy, (ember.randn(3, dtype=ember.complex128,
                                                     requires_grad=True),))
    with pytest.raises(RuntimeError, match="^view_as_complex_copy does not support automatic "
                                           "differentiation for outputs with complex dtype."):
        view_as_complex_copy(ember.randn(3, 2, dtype=F64, requires_grad=True))
    z = ember.randn(2, 2, dtype=ember.complex128, requires_grad=True)      # as PyTorch
    with pytest.raises(RuntimeError, match="^select_copy does not support"):
        select_copy(z, 0, 0)
    with ember.no_grad():
        assert select_copy(z, 0, 0).tolist() == z[0].tolist()


def test_expand_copy_sums_its_gradient():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    expand_copy(x, (3, 2)).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_detach_copy_has_no_history():
    x = ember.ones(2, requires_grad=True)
    d = detach_copy(x)
    assert not d.requires_grad and d.grad_fn is None and d.tolist() == [1.0, 1.0]


def test_one_out():
    x = _x(2, 3)
    out = ember.empty(0, dtype=F64)
    assert t_copy(x, out=out) is out and out.tolist() == [[0, 3], [1, 4], [2, 5]]
    out = ember.empty(5, dtype=F64)
    with pytest.warns(UserWarning, match=r"had shape \[5\], which does not match the required "
                                         r"output shape \[3, 2\]"):
        t_copy(x, out=out)
    assert out.shape == (3, 2)
    out = ember.empty(3, 2, dtype=F64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        select_copy(x, 1, 0, out=out[1])                        # a fitting out: no warning
    assert out[1].tolist() == [0, 3]
    y = ember.ones(2, 3, requires_grad=True)
    out = ember.empty(3, 2)
    t_copy(y, out=out)                                          # allowed, as in PyTorch
    assert out.tolist() == [[1, 1]] * 3


def test_one_out_errors():
    x = _x(2, 3)
    with pytest.raises(RuntimeError, match="^Expected out tensor to have dtype double, but got "
                                           "long int instead$"):
        t_copy(x, out=ember.empty(3, 2, dtype=ember.int64))
    with pytest.raises(TypeError, match="^t_copy\\(\\): argument 'out' must be Tensor, not int"):
        t_copy(x, out=5)
    with pytest.raises(RuntimeError, match=r"^aten::t_copy\(\): functions with out=\.\.\. "
                                           r"arguments don't support automatic differentiation"):
        t_copy(x, out=ember.empty(3, 2, dtype=F64, requires_grad=True))


def test_several_outs():
    x = _x(2, 3)
    a, b = ember.empty(2, 2, dtype=F64), ember.empty(2, 5, dtype=F64)
    assert split_copy(x, 2, 1, out=[a, b]) is None
    assert a.tolist() == [[0, 1], [3, 4]] and b.tolist() == [[2] * 5, [5] * 5]   # broadcast
    outs = (ember.empty(2, dtype=ember.int64), ember.empty(2), ember.empty(2))
    assert unbind_copy(x, 1, out=outs) is None
    assert outs[0].tolist() == [0, 3] and outs[2].tolist() == [2.0, 5.0]         # cast
    with pytest.raises(RuntimeError, match=r"^split_copy_Tensor_out\(\) expected an out= "
                                           r"argument of size 2, got size 1$"):
        split_copy(x, 2, 1, out=[a])
    with pytest.raises(RuntimeError, match="^unbind_copy_int_out expected an out= argument of "
                                           "size 3, got size 2$"):
        unbind_copy(x, 1, out=outs[:2])
    with pytest.raises(RuntimeError, match="^split_with_sizes_copy_out expected an out= "
                                           "argument of size 2, got size 1$"):
        split_with_sizes_copy(x, [1, 2], 1, out=[a])
    with pytest.raises(TypeError, match="^unbind_copy\\(\\): argument 'out' must be tuple of "
                                        "Tensors, not Tensor$"):
        unbind_copy(x, 1, out=a)
    with pytest.raises(TypeError, match="^expected Tensor as element 1 in argument 3, but got "
                                        "int$"):
        split_copy(x, 2, 1, out=[a, 5])
    with pytest.raises(RuntimeError, match=r"output with shape \[1\] doesn't match the "
                                           r"broadcast shape \[2, 1\]"):
        split_copy(x, 2, 1, out=[a, ember.empty(1, dtype=F64)])


@pytest.mark.parametrize("call, error, message", [
    (lambda x: select_copy(x, 0, 5), IndexError,
     "select(): index 5 out of range for tensor of size [2, 3] at dimension 0"),
    (lambda x: select_copy(x, 0, 1.5), TypeError,
     "select_copy(): argument 'index' (position 3) must be int, not float"),
    (lambda x: diagonal_copy(x, 0, 0, 0), RuntimeError,
     "diagonal dimensions cannot be identical 0, 0"),
    (lambda x: permute_copy(x, (0, 0)), RuntimeError,
     "permute(): duplicate dims are not allowed."),
    (lambda x: slice_copy(x, 1, 0, 3, 0), RuntimeError, "slice step must be positive"),
    (lambda x: slice_copy(ember.tensor(1.0)), IndexError,
     "slice() cannot be applied to a 0-dim tensor."),
    (lambda x: split_copy(x, [1, 1]), TypeError,
     "split_copy(): argument 'split_size' (position 2) must be int, not list"),
    (lambda x: split_with_sizes_copy(x, 2), TypeError,
     "split_with_sizes_copy(): argument 'split_sizes' (position 2) must be tuple of ints, "
     "not int"),
    (lambda x: t_copy(ember.zeros(2, 2, 2)), RuntimeError,
     "t() expects a tensor with <= 2 dimensions, but self is 3D"),
    (lambda x: unsqueeze_copy(x, 3), IndexError,
     "Dimension out of range (expected to be in range of [-3, 2], but got 3)"),
    (lambda x: unfold_copy(x, 1, 4, 1), RuntimeError,
     "maximum size for tensor at dimension 1 is 3 but size is 4"),
    (lambda x: view_as_complex_copy(x), RuntimeError,
     "Tensor must have a last dimension of size 2"),
    (lambda x: view_as_real_copy(x), RuntimeError,
     "view_as_real is only supported for complex tensors"),
    (lambda x: view_copy(x, (4,)), RuntimeError, "shape '[4]' is invalid for input of size 6"),
    (lambda x: view_copy(x, ember.float64), RuntimeError,
     "self.size(-1) must be divisible by 2 to view Float as Double (different element sizes), "
     "but got 3"),
    (lambda x: view_copy(x.t(), ember.float16), RuntimeError,
     "self.stride(-1) must be 1 to view Float as Half (different element sizes), but got 3"),
    (lambda x: view_copy(ember.zeros(3, 4)[1:, 1:3], ember.float64), RuntimeError,
     "self.storage_offset() must be divisible by 2 to view Float as Double (different element "
     "sizes), but got 5"),
    (lambda x: view_copy(ember.zeros(3, 3)[:, :2], ember.float64), RuntimeError,
     "self.stride(0) must be divisible by 2 to view Float as Double (different element sizes), "
     "but got 3"),
    (lambda x: view_copy(ember.tensor(1.0), ember.float64), RuntimeError,
     "self.dim() cannot be 0 to view Float as Double (different element sizes)"),
    (lambda x: view_copy(x, 6), TypeError,
     "view_copy() received an invalid combination of arguments - got (Tensor, int)"),
    (lambda x: alias_copy(5), TypeError,
     "alias_copy(): argument 'input' (position 1) must be Tensor, not int"),
])
def test_errors(call, error, message):
    with pytest.raises(error) as info:
        call(ember.zeros(2, 3))
    assert str(info.value).startswith(message)
