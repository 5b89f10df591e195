"""as_strided, Tensor.as_strided_, as_strided_copy and as_strided_scatter: views of a storage
(see NOTE [Storage geometry] in ember/ops/as_strided.py).

Every expected value here was checked against PyTorch 2.13, except where a test says that
PyTorch's gradient is wrong (it fails PyTorch's own gradcheck).
"""

import warnings

import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck
from tests.test_overrides import logged_subclass

F64 = ember.float64


def _arange(n, requires_grad=False):
    return ember.arange(float(n), dtype=F64).requires_grad_(requires_grad)


# --- views ---------------------------------------------------------------------------------------

def test_a_view_writes_through_both_ways():
    x = ember.zeros(6)
    w = x.as_strided((2, 2), (1, 3), 1)
    assert w._base is x and w.stride() == (1, 3) and w.storage_offset() == 1
    w.copy_(ember.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert x.tolist() == [0.0, 1.0, 3.0, 0.0, 2.0, 4.0]
    x[4] = 7.0
    assert w.tolist() == [[1.0, 7.0], [3.0, 4.0]]
    assert x._version == w._version == 2


def test_a_zero_dim_window_is_a_view():
    x = ember.arange(4.0)
    w = x.as_strided((), (), 1)
    w.fill_(9.0)
    assert x.tolist() == [0.0, 9.0, 2.0, 3.0] and w.storage_offset() == 1


def test_the_storage_is_the_view_roots():
    base = ember.arange(10.0)
    cols = base.view(2, 5)[:, 1:]
    assert cols.storage_offset() == 1
    assert cols.as_strided((3,), (1,)).tolist() == [1.0, 2.0, 3.0]      # from its own offset
    assert cols.as_strided((3,), (1,), 0).tolist() == [0.0, 1.0, 2.0]   # from the storage's
    tail = cols.as_strided((2,), (1,), 8)           # outside the view, inside the storage
    assert tail.tolist() == [8.0, 9.0] and tail._base is base and tail.storage_offset() == 8


def test_views_of_views():
    a = _arange(10, requires_grad=True)
    e = a.as_strided((4,), (2,), 1)
    f = e.as_strided((3, 2), (1, 2))
    assert f.tolist() == [[1.0, 3.0], [2.0, 4.0], [3.0, 5.0]] and f.storage_offset() == 1
    (grad,) = ember.autograd.grad(f, a, ember.arange(1.0, 7.0, dtype=F64).view(3, 2))
    assert grad.tolist() == [0.0, 1.0, 0.0, 7.0, 0.0, 6.0, 0.0, 0.0, 0.0, 0.0]


def test_zero_strides_overlap_and_0dim():
    x = ember.arange(10.0)
    assert x.as_strided((3,), (0,), 9).tolist() == [9.0, 9.0, 9.0]
    assert x.as_strided((2, 2), (1, 1), 4).tolist() == [[4.0, 5.0], [5.0, 6.0]]
    assert x.as_strided((), (), 3).item() == 3.0
    assert ember.tensor(5.0).as_strided((2, 3), (0, 0)).tolist() == [[5.0] * 3] * 2
    empty = x.as_strided((0,), (1,), 100)        # no element: no bounds to check
    assert empty.shape == (0,) and empty.storage_offset() == 100


def test_complex_and_bool():
    z = ember.arange(6.0).to(ember.complex64) * (1 + 1j)
    assert z.as_strided((2,), (3,), 1).tolist() == [1 + 1j, 4 + 4j]
    b = ember.tensor([True, False])
    assert b.as_strided((2, 2), (1, 0)).tolist() == [[True, True], [False, False]]


def test_as_strided_copy_is_contiguous():
    d = ember.arange(10.0)
    c = ember.as_strided_copy(d, (2, 2), (1, 1), 1)
    assert c.tolist() == [[1.0, 2.0], [2.0, 3.0]] and c.is_contiguous() and c._base is None


# --- gradients -------------------------------------------------------------------------------

def test_overlapping_windows_add_their_gradients():
    x = _arange(6, requires_grad=True)
    out = (x * 1).as_strided((3, 3), (1, 1))
    (grad,) = ember.autograd.grad(out, x, ember.arange(9.0, dtype=F64).view(3, 3))
    assert grad.tolist() == [0.0, 4.0, 12.0, 12.0, 8.0, 0.0]


def test_an_expanded_input_shares_the_gradient_of_its_storage():
    b = ember.tensor([1.0, 2.0, 3.0], dtype=F64, requires_grad=True)
    e = b.expand(2, 3)
    y = e.as_strided((2, 2), (1, 1))
    g = ember.tensor([[1.0, 10.0], [100.0, 1000.0]], dtype=F64)
    (ge,) = ember.autograd.grad(y, e, g, retain_graph=True)
    assert ge.tolist() == [[0.5, 55.0, 500.0], [0.5, 55.0, 500.0]]
    (gb,) = ember.autograd.grad(y, b, g)
    assert gb.tolist() == [1.0, 110.0, 1000.0]
    q = ember.tensor([5.0], dtype=F64, requires_grad=True)
    qe = q.expand(3)
    (gq,) = ember.autograd.grad(qe.as_strided((2,), (0,)), qe,
                                ember.tensor([1.0, 2.0], dtype=F64))
    assert gq.tolist() == [1.0, 1.0, 1.0]


def test_a_noncontiguous_input_reads_its_storage_positions():
    m = _arange(12, requires_grad=True)
    mv = m.view(3, 4).t()[1:]
    assert mv.stride() == (1, 4) and mv.storage_offset() == 1
    out = mv.as_strided((2, 3), (2, 3), 1)
    assert out.tolist() == [[1.0, 4.0, 7.0], [3.0, 6.0, 9.0]]
    g = ember.arange(1.0, 7.0, dtype=F64).view(2, 3)
    (gm,) = ember.autograd.grad(out, m, g, retain_graph=True)
    assert gm.tolist() == [0.0, 1.0, 0.0, 4.0, 0.0, 0.0, 5.0, 3.0, 0.0, 6.0, 0.0, 0.0]
    (gmv,) = ember.autograd.grad(out, mv, g)
    assert gmv.tolist() == [[1.0, 0.0, 6.0], [0.0, 5.0, 0.0], [4.0, 3.0, 0.0]]


def test_storage_outside_the_input_gets_no_gradient():
    # as in PyTorch: the view's own backward covers only the view (so gradcheck would fail)
    p = _arange(10, requires_grad=True)
    pv = (p * 1)[2:5]
    out = pv.as_strided((4,), (2,), 0)
    assert out.tolist() == [0.0, 2.0, 4.0, 6.0]
    (g,) = ember.autograd.grad(out, pv, ember.tensor([1.0, 2.0, 3.0, 4.0], dtype=F64))
    assert g.tolist() == [2.0, 0.0, 3.0]
    x = _arange(12, requires_grad=True)
    o = x.view(3, 4)[:, 1:].as_strided((2, 2), (1, 4), 0)
    assert o.tolist() == [[0.0, 4.0], [1.0, 5.0]]
    (gx,) = ember.autograd.grad(o, x, ember.arange(1.0, 5.0, dtype=F64).view(2, 2))
    assert gx.tolist() == [0.0, 3.0, 0.0, 0.0, 0.0, 4.0] + [0.0] * 6


def test_double_backward():
    x = ember.arange(1.0, 7.0, dtype=F64).requires_grad_()
    y = (x * x).as_strided((2, 2), (1, 1), 1)
    (gx,) = ember.autograd.grad(y, x, ember.ones(2, 2, dtype=F64), create_graph=True)
    assert gx.tolist() == [0.0, 4.0, 12.0, 8.0, 0.0, 0.0]
    assert ember.autograd.grad(gx.sum(), x)[0].tolist() == [0.0, 2.0, 4.0, 2.0, 0.0, 0.0]


@pytest.mark.parametrize("fn", [
    lambda a: ember.as_strided(a, (3, 4), (2, 1), 1),
    lambda a: a.view(3, 4).t().as_strided((2, 3), (2, 3), 1),
    lambda a: a[:3].expand(2, 3).as_strided((2, 2), (1, 1)),
    lambda a: a[2:].as_strided((2, 5), (0, 2)),
    lambda a: a[3].as_strided((2,), (0,)),
    lambda a: a.as_strided((), (), 5),
    lambda a: a.as_strided((0, 3), (1, 1), 2),
], ids=["overlapping", "transposed", "expanded", "zero_stride", "0dim_input", "0dim", "empty"])
def test_gradcheck(fn):
    x = ember.randn(12, dtype=F64, requires_grad=True)
    assert gradcheck(fn, (x,)) and gradgradcheck(fn, (x,))


def test_gradcheck_complex():
    z = ember.randn(6, dtype=ember.complex128, requires_grad=True)
    assert gradcheck(lambda a: a.as_strided((2, 2), (1, 2)), (z,))


def test_write_through_a_window_of_a_graph_tensor():
    x = _arange(6, requires_grad=True)
    y = x * 1
    v = y.as_strided((2, 2), (1, 2))
    v.mul_(2)
    assert y.tolist() == [0.0, 2.0, 4.0, 6.0, 4.0, 5.0] and type(y.grad_fn).__name__ == \
        "CopySlices"
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0, 2.0, 1.0, 1.0]


def test_a_window_sees_in_place_changes_of_its_base():
    x = _arange(6, requires_grad=True)
    y = x * 1
    v = y.as_strided((2, 2), (1, 1))
    y.mul_(3)
    assert v.tolist() == [[0.0, 3.0], [3.0, 6.0]]
    v.sum().backward()
    assert x.grad.tolist() == [3.0, 6.0, 3.0, 0.0, 0.0, 0.0]


# --- the in-place form ---------------------------------------------------------------------------

def test_as_strided_in_place_keeps_the_storage():
    x = ember.arange(10.0)
    ptr = x.data_ptr()
    assert x.as_strided_((2,), (1,), 3) is x
    assert x.tolist() == [3.0, 4.0] and x._version == 1 and x.data_ptr() == ptr + 12
    # the storage is still the first ten elements (PyTorch: x.storage_offset() is now 3)
    assert x.as_strided((3,), (1,), 0).tolist() == [0.0, 1.0, 2.0]
    assert x.as_strided((3,), (2,)).tolist() == [3.0, 5.0, 7.0]
    with pytest.raises(RuntimeError, match=r"storage offset 3, and itemsize 4 requiring a "
                                           r"storage size of 92 are out of bounds for storage "
                                           r"of size 40"):
        x.as_strided((20,), (1,))
    x.as_strided_((2, 2), (1, 1))
    assert x.tolist() == [[3.0, 4.0], [4.0, 5.0]]
    assert ember.as_strided_(ember.arange(4.0), (2,), (2,)).tolist() == [0.0, 2.0]


def test_as_strided_in_place_after_the_array_was_replaced():
    x = ember.arange(10.0)
    x.as_strided_((2,), (1,), 3)
    x.data = ember.arange(5.0)
    assert x.as_strided((5,), (1,)).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_as_strided_in_place_on_a_view():
    base = ember.arange(8.0)
    v = base[2:]
    v.as_strided_((3,), (2,))
    assert v.tolist() == [2.0, 4.0, 6.0] and v.storage_offset() == 2 and v._base is base
    v.mul_(10)
    assert base.tolist() == [0.0, 1.0, 20.0, 3.0, 40.0, 5.0, 60.0, 7.0]


def test_as_strided_in_place_gradients():
    a = _arange(6, requires_grad=True)
    b = a * 1
    b.as_strided_((2, 2), (1, 2), 1)
    assert b.tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert type(b.grad_fn).__name__ == "AsStridedBackward1"     # as PyTorch
    (b * ember.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=F64)).sum().backward()
    assert a.grad.tolist() == [0.0, 1.0, 3.0, 2.0, 4.0, 0.0]

    a = _arange(8, requires_grad=True)
    v = (a * 1)[2:]
    v.as_strided_((2, 2), (1, 2))
    assert v.tolist() == [[2.0, 4.0], [3.0, 5.0]] and v.storage_offset() == 2
    (v * ember.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=F64)).sum().backward()
    assert a.grad.tolist() == [0.0, 0.0, 1.0, 3.0, 2.0, 4.0, 0.0, 0.0]
    x = ember.randn(12, dtype=F64, requires_grad=True)
    assert gradgradcheck(lambda t: (t * 1)[1:].as_strided_((2, 3), (1, 2), 2) * 1, (x,))


def test_as_strided_in_place_on_a_leaf_raises():
    z = ember.randn(6, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used "
                                           "in an in-place operation."):
        z.as_strided_((2,), (1,))


# --- as_strided_scatter -----------------------------------------------------------------------

def test_scatter_values():
    x = ember.zeros(4)
    src = ember.arange(4.0).view(2, 2)
    out = ember.as_strided_scatter(x, src, (2, 2), (1, 1))       # the last write stays
    assert out.tolist() == [0.0, 2.0, 3.0, 0.0] and x.tolist() == [0.0] * 4
    tail = ember.arange(8.0)[2:]
    ten = ember.tensor([10.0, 20.0])
    assert ember.as_strided_scatter(tail, ten, (2,), (3,)).tolist() == \
        [10.0, 3.0, 4.0, 20.0, 6.0, 7.0]
    assert tail.as_strided_scatter(ten, (2,), (3,), 0).tolist() == \
        [2.0, 20.0, 4.0, 5.0, 6.0, 7.0]
    t = ember.arange(6.0).view(2, 3).t()
    out = ember.as_strided_scatter(t, ten, (2,), (1,))
    assert out.tolist() == [[10.0, 3.0], [20.0, 4.0], [2.0, 5.0]] and out.stride() == (1, 3)
    e = ember.tensor([1.0, 2.0, 3.0]).expand(2, 3)     # copied into contiguous memory first
    assert ember.as_strided_scatter(e, ten, (2,), (1,)).tolist() == \
        [[10.0, 20.0, 3.0], [1.0, 2.0, 3.0]]


def test_scatter_casts_src():
    ints = ember.arange(6)
    assert ember.as_strided_scatter(ints, ember.tensor([7.9, 8.2]), (2,), (3,)).tolist() == \
        [7, 1, 2, 8, 4, 5]
    flags = ember.zeros(3, dtype=ember.bool)
    assert ember.as_strided_scatter(flags, ember.tensor([0.5, 0.0]), (2,), (1,)).tolist() == \
        [True, False, False]
    with pytest.warns(UserWarning, match="Casting complex values to real discards the "
                                         "imaginary part"):
        out = ember.as_strided_scatter(ember.zeros(3), ember.ones(2, dtype=ember.complex64),
                                       (2,), (1,))
    assert out.tolist() == [1.0, 1.0, 0.0] and out.dtype is ember.float32


def test_scatter_gradients():
    # PyTorch 2.13 gives input the gradient of the overwritten elements instead of the others'
    # ([0, 20, 0, 40, 0, 0] here), which fails its own gradcheck; this is the true gradient
    x = ember.arange(1.0, 7.0, dtype=F64).requires_grad_()
    src = ember.tensor([100.0, 101.0], dtype=F64, requires_grad=True)
    out = ember.as_strided_scatter(x, src, (2,), (2,), 1)
    assert out.tolist() == [1.0, 100.0, 3.0, 101.0, 5.0, 6.0]
    gx, gs = ember.autograd.grad(out, (x, src), ember.arange(1.0, 7.0, dtype=F64) * 10)
    assert gx.tolist() == [10.0, 0.0, 30.0, 0.0, 50.0, 60.0] and gs.tolist() == [20.0, 40.0]
    # of several writes to one element only the last one's reaches the output (PyTorch gives
    # each a gradient)
    x = ember.arange(1.0, 5.0, dtype=F64).requires_grad_()
    src = ember.arange(100.0, 104.0, dtype=F64).view(2, 2).requires_grad_()
    out = ember.as_strided_scatter(x, src, (2, 2), (1, 1))
    assert out.tolist() == [100.0, 102.0, 103.0, 4.0]
    gx, gs = ember.autograd.grad(out, (x, src), ember.arange(1.0, 5.0, dtype=F64) * 10)
    assert gx.tolist() == [0.0, 0.0, 0.0, 40.0] and gs.tolist() == [[10.0, 0.0], [20.0, 30.0]]


def test_scatter_gradient_to_a_src_of_another_dtype():
    src = ember.tensor([1.0, 2.0], requires_grad=True)
    out = ember.as_strided_scatter(ember.zeros(4, dtype=F64), src, (2,), (2,))
    (g,) = ember.autograd.grad(out, src, ember.arange(4.0, dtype=F64))
    assert g.dtype is ember.float32 and g.tolist() == [0.0, 2.0]


@pytest.mark.parametrize("fn", [
    lambda a, b: ember.as_strided_scatter(a, b, (2, 2), (1, 3), 1),
    lambda a, b: ember.as_strided_scatter(a, b, (2, 2), (1, 1), 1),
    lambda a, b: ember.as_strided_scatter(a.view(3, 4).t(), b, (2, 2), (1, 3), 1),
    lambda a, b: ember.as_strided_scatter(a[:3].expand(2, 3), b, (2, 2), (1, 1)),
    lambda a, b: a[2:].as_strided_scatter(b, (2, 2), (1, 1), 0),
    lambda a, b: a[2:].as_strided_scatter(b, (2, 2), (2, 1)),
], ids=["plain", "overlapping", "transposed", "expanded", "outside_the_view", "view"])
def test_scatter_gradcheck(fn):
    x = ember.randn(12, dtype=F64, requires_grad=True)
    s = ember.randn(2, 2, dtype=F64, requires_grad=True)
    assert gradcheck(fn, (x, s)) and gradgradcheck(fn, (x, s))


# --- errors, overrides, vmap --------------------------------------------------------------------

def test_method_errors_name_method_positions():
    x = ember.zeros(10)
    with pytest.raises(TypeError, match=r"as_strided\(\): argument 'size' \(position 1\) must "
                                        r"be tuple of ints, not int"):
        x.as_strided(2, 1)
    with pytest.raises(TypeError, match=r"as_strided_\(\): argument 'size' \(position 1\) "
                                        r"must be tuple of ints, not int"):
        x.as_strided_(2, 1)
    with pytest.raises(TypeError, match=r"as_strided_\(\): argument 'storage_offset' "
                                        r"\(position 3\) must be int, not float"):
        x.as_strided_((2,), (1,), 1.5)
    with pytest.raises(TypeError, match=r"argument 'stride' \(position 3\) must be tuple of "
                                        r"ints, but found element of type float at pos 0"):
        x.as_strided_scatter(ember.ones(2), (2,), (1.0,))
    with pytest.raises(TypeError, match=r"argument 'storage_offset' \(position 4\) must be "
                                        r"int, not Tensor"):
        ember.as_strided(x, (2,), (1,), ember.tensor(1.0))
    with pytest.raises(RuntimeError, match=r"setStorage: sizes \[20\], strides \[1\], storage "
                                           r"offset 0, and itemsize 4 requiring a storage size "
                                           r"of 80 are out of bounds for storage of size 40"):
        x.clone().as_strided_((20,), (1,))
    with pytest.raises(TypeError, match=r"as_strided\(\): argument 'input' \(position 1\) must "
                                        r"be Tensor, not list"):
        ember.as_strided([1, 2], (2,), (1,))


def test_integer_tensors_as_sizes_and_offsets():
    x = ember.arange(10.0)
    out = ember.as_strided(x, (ember.tensor(2),), (1,), ember.tensor(1))
    assert out.tolist() == [1.0, 2.0] and out.storage_offset() == 1


def test_overrides_see_the_public_functions():
    calls = []
    Logged = logged_subclass(calls)
    x = ember.arange(6.0).as_subclass(Logged)
    y = ember.as_strided(x, (2,), (2,), 1)
    x.as_strided((2,), (1,))
    z = x.as_strided_scatter(ember.ones(2), (2,), (1,))
    x.as_strided_((3,), (2,))
    assert calls == ["as_strided", "as_strided", "as_strided_scatter", "as_strided_"]
    assert type(y) is Logged and y.tolist() == [1.0, 3.0] and type(z) is Logged
    assert x.tolist() == [0.0, 2.0, 4.0]


def test_vmap_treats_each_example_as_its_own_storage():
    # no batching rule: vmap runs the ops once per example, whose values are its storage.
    # PyTorch agrees for as_strided on examples along dim 0 of a contiguous tensor (it reads
    # the batch's memory itself, so not for other dims); its vmap of as_strided_scatter raises
    x = ember.arange(12.0).view(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = ember.func.vmap(lambda t: t.as_strided((2,), (1,), 1))(x)
        scattered = ember.func.vmap(
            lambda t: ember.as_strided_scatter(t, ember.ones(2), (2,), (2,)))(x)
    assert out.tolist() == [[1.0, 2.0], [5.0, 6.0], [9.0, 10.0]]
    assert scattered.tolist() == [[1.0, 1.0, 1.0, 3.0], [1.0, 5.0, 1.0, 7.0],
                                  [1.0, 9.0, 1.0, 11.0]]


def test_in_place_on_a_window_of_a_column_major_tensor_differentiates_in_memory_order():
    # x.t() * 1 is laid out column-major: the window reads memory order, and so must the
    # gradient's replay of it (values recorded from torch 2.13)
    x = ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    y = x.t() * 1
    assert y.stride() == (1, 3)
    y.as_strided((2,), (1,), 1).mul_(10)
    assert y.tolist() == [[1.0, 4.0], [20.0, 5.0], [30.0, 6.0]]
    (y * ember.arange(6.0).reshape(3, 2)).sum().backward()
    assert x.grad.tolist() == [[0.0, 20.0, 40.0], [1.0, 3.0, 5.0]]
