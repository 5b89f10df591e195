"""In-place view ops (squeeze_, unsqueeze_, t_, transpose_, swapaxes_, swapdims_): the tensor
itself takes the view's shape and strides (see NOTE [In-place view ops] in ops/_inplace.py).

Every expected value here was checked against PyTorch 2.13.
"""

import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck
from tests.test_overrides import logged_subclass

_LEAF_MESSAGE = "a leaf Variable that requires grad is being used in an in-place operation."


def _arange(*shape, requires_grad=False):
    n = 1
    for s in shape:
        n *= s
    return ember.arange(float(n)).reshape(shape).requires_grad_(requires_grad)


def test_t_changes_shape_and_strides_in_place():
    x = _arange(2, 3)
    ptr = x.data_ptr()
    assert x.t_() is x
    assert x.shape == (3, 2) and x.stride() == (1, 3) and not x.is_contiguous()
    assert x._version == 1 and x.data_ptr() == ptr
    assert x.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]


def test_a_sequence_of_in_place_view_ops():
    x = _arange(2, 1, 3)
    steps = [(lambda t: t.squeeze_(), (2, 3), (3, 1)),
             (lambda t: t.unsqueeze_(0), (1, 2, 3), (6, 3, 1)),
             (lambda t: t.transpose_(0, 2), (3, 2, 1), (1, 3, 6)),
             (lambda t: t.swapaxes_(0, 1), (2, 3, 1), (3, 1, 6)),
             (lambda t: t.swapdims_(0, 1), (3, 2, 1), (1, 3, 6)),
             (lambda t: t.squeeze_(1), (3, 2, 1), (1, 3, 6))]      # not size 1: no change
    for version, (step, shape, strides) in enumerate(steps, 1):
        assert step(x) is x
        assert x.shape == shape and x.stride() == strides and x._version == version
    assert ember.zeros(1, 3, 1).squeeze_((0, 2)).shape == (3,)


def test_the_memory_stays_shared_with_aliases():
    x = _arange(2, 3)
    alias = x.detach()                  # shares memory and version, keeps its own shape
    x.t_()
    assert alias.shape == (2, 3) and alias._version == x._version == 1
    x[0, 1] = 100.0
    assert alias[1, 0].item() == 100.0


def test_small_tensors():
    assert ember.tensor(1.0).t_().shape == () and ember.zeros(3).t_().shape == (3,)
    assert ember.tensor(1.0).transpose_(0, -1).shape == ()
    assert ember.tensor(1.0).unsqueeze_(-1).shape == (1,)


def test_errors_leave_the_tensor_unchanged():
    x = ember.zeros(2, 3, 4)
    with pytest.raises(RuntimeError, match=r"^t_\(\) expects a tensor with <= 2 dimensions, but "
                                           r"self is 3D$"):
        x.t_()
    with pytest.raises(IndexError, match=r"range of \[-3, 2\], but got 3\)"):
        x.transpose_(0, 3)
    with pytest.raises(IndexError, match=r"range of \[-4, 3\], but got 4\)"):
        x.unsqueeze_(4)
    with pytest.raises(IndexError, match=r"range of \[-3, 2\], but got 3\)"):
        x.squeeze_(3)
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        ember.zeros(1, 3, 1).squeeze_((0, 0))
    assert x.shape == (2, 3, 4) and x._version == 0


# --- autograd ---------------------------------------------------------------------------------

@pytest.mark.parametrize("call", [lambda t: t.t_(), lambda t: t.unsqueeze_(0),
                                  lambda t: t.squeeze_(), lambda t: t.transpose_(0, 1),
                                  lambda t: t.swapaxes_(0, 1), lambda t: t.swapdims_(1, 0)])
def test_a_leaf_that_requires_grad_is_refused(call):
    a = ember.zeros(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match=_LEAF_MESSAGE):
        call(a)
    assert a.shape == (2, 3) and a._version == 0
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is "
                                           "being used in an in-place operation."):
        call(a.view(3, 2))


def test_a_leaf_changed_under_no_grad_stays_a_leaf():
    a = _arange(2, 3, requires_grad=True)
    with ember.no_grad():
        a.t_()
    assert a.shape == (3, 2) and a.is_leaf and a.requires_grad and a.grad_fn is None
    assert a._version == 1
    (a * _arange(3, 2)).sum().backward()
    assert a.grad.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]


def test_a_non_leaf_gets_the_view_ops_backward():
    a = ember.zeros(2, 3, requires_grad=True)
    b = a * 2
    mul = b.grad_fn
    b.t_()
    # PyTorch numbers t_()'s node after t()'s (TBackward0)
    assert b.grad_fn.name() == "TBackward1" and b.grad_fn.next_functions[0][0] is mul
    (b * _arange(3, 2)).sum().backward()
    assert a.grad.tolist() == [[0.0, 4.0, 8.0], [2.0, 6.0, 10.0]]


def test_gradients_through_a_chain_of_in_place_view_ops():
    def f(a):
        b = a * 2
        b.squeeze_(1)
        b.t_()
        b.unsqueeze_(-1)
        b.transpose_(0, 2)
        return b

    a = ember.randn(2, 1, 3, dtype=ember.float64, requires_grad=True)
    assert f(a).shape == (1, 2, 3) and f(a).grad_fn.name() == "TransposeBackward1"
    assert gradcheck(f, (a,)) and gradgradcheck(f, (a,))


def test_retain_grad_keeps_the_gradient_of_the_old_shape():
    a = ember.zeros(2, 3, requires_grad=True)
    b = a * 1
    b.retain_grad()
    b.t_()
    (b * _arange(3, 2)).sum().backward()
    assert b.grad.tolist() == [[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]]     # PyTorch does the same


def test_saved_tensors_see_the_version_bump():
    a = ember.zeros(2, 3, requires_grad=True)
    b = a * 2
    c = b * b                           # saves b
    b.t_()
    with pytest.raises(RuntimeError, match="one of the variables needed for gradient "
                                           "computation has been modified by an inplace"):
        c.sum().backward()
    d = (a * 2).exp()                   # saves its output
    d.t_()
    with pytest.raises(RuntimeError, match="has been modified by an inplace operation"):
        d.sum().backward()


def test_outputs_of_multi_view_ops_are_refused():
    b = ember.zeros(2, 3, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="is a view and is being modified inplace. This view "
                                           "is the output of a function that returns multiple "
                                           "views."):
        b.split(1)[0].t_()
    x = ember.zeros(2, 3)               # without autograd there is nothing to refuse
    assert x.split(1)[0].t_().shape == (3, 1)


# --- views ------------------------------------------------------------------------------------

def test_a_view_stays_a_view_of_its_base():
    root = ember.arange(6.0)
    v = root.view(2, 3)[0]
    v.unsqueeze_(0)
    assert v.shape == (1, 3) and v.stride() == (3, 1) and v._base is root
    assert v.storage_offset() == 0 and root._version == v._version == 1
    v[0, 1] = 100.0
    assert root[1].item() == 100.0
    w = root.view(3, 2)
    w.t_()
    assert w.shape == (2, 3) and w.stride() == (1, 2) and w._base is root
    assert root.shape == (6,)


def test_in_place_op_on_a_view_after_its_shape_changed():
    a = ember.zeros(2, 3, requires_grad=True)
    b = a * 1
    v = b[0:1]
    v.t_()
    assert v.shape == (3, 1) and v._base is b and v.grad_fn.name() == "TBackward1"
    v.mul_(2)
    assert b.grad_fn.name() == "torch::autograd::CopySlices"
    b.sum().backward()
    assert a.grad.tolist() == [[2.0, 2.0, 2.0], [1.0, 1.0, 1.0]]


def _changed(make, use):
    """a.grad after ``make(a * 1)`` builds views and changes shapes, and ``use`` backpropagates."""
    a = ember.zeros(2, 3, requires_grad=True)
    views = make(a * 1)
    use(*views).sum().backward()
    return a.grad.tolist()


def _base_t_then_view_mul(b):
    v = b[0]
    b.t_()
    v.mul_(2)
    return (b,)


def _base_t_mul(b):
    v = b[0]
    b.t_()
    b.mul_(3)
    return (v,)


def _view_t_base_mul(b):
    v = b[0:1]
    v.t_()
    b.mul_(3)
    return (v,)


def _view_of_changed_view(b):
    v = b[0:1]
    v.t_()
    v[1:].mul_(5)
    return (b,)


def _columns_t_base_mul(b):
    v = b[:, 1:]
    v.t_()
    b.mul_(_arange(2, 3))
    return (v,)


def _child_taken_before_parent_changed(b):
    v = b[0:1]
    w = v[:, 1:]
    v.t_()
    b.mul_(2)
    return (w,)


def _base_unsqueeze(b):
    v = b[:, 1]
    b.unsqueeze_(0)
    b.mul_(3)
    return (v,)


def _two_changes(b):
    v = b[:, 1:]
    b.transpose_(0, 1)
    b.unsqueeze_(2)
    b.mul_(_arange(3, 2, 1))
    return (v,)


def _view_between_two_changes(b):
    b.t_()
    v = b[1:]
    b.unsqueeze_(0)
    b.mul_(_arange(1, 3, 2))
    return (v,)


@pytest.mark.parametrize("make,use,expected", [
    (_base_t_then_view_mul, lambda b: b * _arange(3, 2), [[0, 4, 8], [1, 3, 5]]),
    (_base_t_mul, lambda v: v * ember.tensor([1.0, 2.0, 3.0]), [[3, 6, 9], [0, 0, 0]]),
    (_view_t_base_mul, lambda v: v * ember.tensor([[1.0], [2.0], [3.0]]),
     [[3, 6, 9], [0, 0, 0]]),
    (_view_of_changed_view, lambda b: b * _arange(2, 3), [[0, 5, 10], [3, 4, 5]]),
    (_columns_t_base_mul, lambda v: v * ember.tensor([[1.0, 2.0], [3.0, 4.0]]),
     [[0, 1, 6], [0, 8, 20]]),
    (_child_taken_before_parent_changed, lambda w: w * ember.tensor([[1.0, 2.0]]),
     [[0, 2, 4], [0, 0, 0]]),
    (_base_unsqueeze, lambda v: v * ember.tensor([1.0, 2.0]), [[0, 3, 0], [0, 6, 0]]),
    (_two_changes, lambda v: v * ember.tensor([[1.0, 2.0], [3.0, 4.0]]),
     [[0, 2, 8], [0, 9, 20]]),
    (_view_between_two_changes, lambda v: v * ember.tensor([[1.0, 2.0], [3.0, 4.0]]),
     [[0, 2, 12], [0, 6, 20]]),
], ids=["base_t_then_view_mul", "base_t_mul", "view_t_base_mul", "view_of_changed_view",
        "columns_t_base_mul", "child_taken_before_parent_changed", "base_unsqueeze",
        "two_changes", "view_between_two_changes"])
def test_views_taken_before_a_shape_change_keep_their_gradients(make, use, expected):
    """A view made before its base (or the view it came from) changed shape in place still
    routes its gradient to the elements it covers."""
    assert _changed(make, use) == [[float(v) for v in row] for row in expected]


def test_squeeze_of_a_base_with_older_views():
    a = _arange(2, 1, 3).requires_grad_()
    b = a * 1
    v = b[1]
    b.squeeze_(1)
    b.mul_(2)
    (v * ember.tensor([[1.0, 2.0, 3.0]])).sum().backward()
    assert a.grad.tolist() == [[[0.0, 0.0, 0.0]], [[2.0, 4.0, 6.0]]]


def test_subclasses_see_the_in_place_method():
    calls = []
    Logged = logged_subclass(calls)
    x = ember.zeros(2, 3).as_subclass(Logged)
    assert x.t_() is x and type(x) is Logged and x.shape == (3, 2)
    assert calls == ["t_", "__get__"]       # (x.shape is offered too, as in PyTorch)


def test_tensor_split_pieces_may_be_modified_in_place():
    w = ember.arange(12.0).reshape(4, 3).requires_grad_()
    x = w * 1
    a, b, c = x.tensor_split(3)
    a.mul_(2)
    (x.sum() + (a * c).sum()).backward()
    assert x.grad_fn.name() == "torch::autograd::CopySlices"
    assert w.grad.tolist() == [[20.0, 22.0, 24.0], [20.0, 22.0, 24.0], [1.0, 1.0, 1.0],
                               [7.0, 11.0, 15.0]]


def test_split_views_name_the_forward_function_when_modified_in_place():
    x = ember.ones(4, 4, requires_grad=True) * 1
    for pieces, name in ((x.split(2), "Split"), (x.split([1, 3]), "SplitWithSizes"),
                         (x.unbind(), "Unbind")):
        with pytest.raises(RuntimeError, match=f"^Output 0 of {name} is a view and is being "
                                               f"modified inplace"):
            pieces[0].mul_(2)


@pytest.mark.parametrize("call, node", [
    (lambda t: ember.unsafe_split(t, 2), "UnsafeSplitBackward0"),
    (lambda t: t.unsafe_chunk(3), "UnsafeSplitBackward0"),
    (lambda t: ember.unsafe_split_with_sizes(t, [1, 5]), "UnsafeSplitWithSizesBackward0"),
])
def test_unsafe_split_pieces_share_memory_but_are_not_views(call, node):
    x = ember.arange(6.0, requires_grad=True)
    y = x * 1
    pieces = call(y)
    assert [p.grad_fn.name() for p in pieces] == [node] * len(pieces)
    assert pieces[0]._base is None and not pieces[0]._is_view()
    pieces[0].add_(10)                  # allowed, writes into y, and y's version stays
    assert y.tolist()[0] == 10.0 and pieces[0]._version == 1 and y._version == 0
    pieces[-1].sum().backward()
    assert x.grad.tolist() == [0.0] * (6 - pieces[-1].numel()) + [1.0] * pieces[-1].numel()
