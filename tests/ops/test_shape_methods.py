"""Shape ops beyond the generic OpInfo checks: method forms, aliases, composites, memory sharing
of views, gradients of multi-output ops, and the transpose properties."""

import re
import warnings

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck
from ember.testing import make_tensor
from tests.ops.opdb import join as join_db


def _np(t):
    return np.asarray(t.detach().resolve_conj().resolve_neg())


def _same(a, b):
    assert tuple(a.shape) == tuple(np.shape(b))
    np.testing.assert_array_equal(_np(a), b if isinstance(b, np.ndarray) else _np(b))


def _x(*shape, dtype=ember.float64, requires_grad=False):
    ember.manual_seed(len(shape))
    return ember.randn(shape, dtype=dtype, requires_grad=requires_grad)


# --- method forms: varargs and sequences mean the same ------------------------------------------

@pytest.mark.parametrize("call_a,call_b", [
    (lambda x: x.view(3, 4), lambda x: x.view((3, 4))),
    (lambda x: x.view(-1), lambda x: x.view([12])),
    (lambda x: x.reshape(2, -1, 2), lambda x: x.reshape([2, 3, 2])),
    (lambda x: x.permute(1, 0), lambda x: x.permute((1, 0))),
    (lambda x: x.permute(1, 0), lambda x: ember.permute(x, [-1, -2])),
    (lambda x: x.expand(2, 3, 4), lambda x: x.t().t().expand((2, -1, -1))),
    (lambda x: x.repeat(2, 1), lambda x: x.repeat((2, 1))),
    (lambda x: x.repeat(2, 1, 1), lambda x: x.repeat(ember.Size([2, 1, 1]))),
    (lambda x: x.tile(2), lambda x: ember.tile(x, (1, 2))),
    (lambda x: x.tile(2, 2), lambda x: x.tile((2, 2))),
    (lambda x: x.flip(0, 1), lambda x: x.flip((0, 1))),
    (lambda x: x.flip(1), lambda x: ember.flip(x, [1])),
    (lambda x: x.flatten(), lambda x: ember.flatten(x, 0, -1)),
    (lambda x: x.squeeze(), lambda x: ember.squeeze(x)),     # (dim=None: no overload)
    (lambda x: x.unflatten(1, (2, 2)), lambda x: ember.unflatten(x, -1, [2, -1])),
    (lambda x: x.movedim(0, 1), lambda x: ember.moveaxis(x, (0,), (1,))),
    (lambda x: x.swapaxes(0, 1), lambda x: x.swapdims(1, 0)),
    (lambda x: x.split(2, 1), lambda x: ember.split(x, [2, 2], dim=1)),
])
def test_method_forms_agree(call_a, call_b):
    x = _x(3, 4)
    a, b = call_a(x), call_b(x)
    if isinstance(a, tuple):
        assert len(a) == len(b)
        for p, q in zip(a, b):
            _same(p, q)
    else:
        _same(a, b)


def test_method_varargs_match_numpy():
    x = _x(3, 4)
    a = _np(x)
    _same(x.view(4, 3), a.reshape(4, 3))
    _same(x.permute(1, 0), a.T)
    _same(x.repeat(2, 1, 3), np.tile(a, (2, 1, 3)))
    _same(x.tile(2), np.tile(a, 2))
    _same(x.flip(0, 1), a[::-1, ::-1])
    _same(x.expand(2, 3, 4), np.broadcast_to(a, (2, 3, 4)))


def test_aliases_are_entry_points_of_their_own():
    # as in PyTorch, each name is its own function, whose TypeErrors give that name
    for alias, target in (("swapdims", "transpose"), ("moveaxis", "movedim"),
                          ("broadcast_to", "expand")):
        assert getattr(ember, alias) is not getattr(ember, target)
        assert getattr(ember, alias).__name__ == alias
        assert getattr(ember, alias)._ember_op is getattr(ember, target)._ember_op
    assert ember.Tensor.moveaxis.__name__ == "moveaxis"
    assert ember.Tensor.swapdims_.__name__ == "swapdims_"
    # as torch.concat is not torch.cat (hand-written cat: a renaming entry of its own)
    assert ember.concat is not ember.cat and ember.concatenate.__name__ == "concatenate"
    x = ember.arange(6.).reshape(2, 3)
    assert ember.swapdims(x, 0, 1).tolist() == ember.transpose(x, 0, 1).tolist()
    assert x.moveaxis(0, 1).tolist() == x.movedim(0, 1).tolist()
    assert not hasattr(ember, "repeat")         # Tensor.repeat only, as in PyTorch


def test_broadcast_to_error_names_dtype():
    with pytest.raises(RuntimeError, match=r"expand\(ember\.LongTensor\{\[2\]\}, size=\[\]\)"):
        ember.broadcast_to(ember.tensor([1, 2]), ())


# --- views share memory and the version counter with their base ---------------------------------

VIEWS = {
    "view": lambda x: x.view(4, 3),
    "reshape": lambda x: x.reshape(2, 6),
    "flatten": lambda x: x.flatten(),
    "unflatten": lambda x: x.unflatten(1, (2, 2)),
    "expand": lambda x: x.expand(2, 3, 4),
    "expand_as": lambda x: x.expand_as(ember.zeros(2, 3, 4)),
    "broadcast_to": lambda x: ember.broadcast_to(x, (5, 3, 4)),
    "view_as": lambda x: x.view_as(ember.zeros(12)),
    "reshape_as": lambda x: x.reshape_as(ember.zeros(6, 2)),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "squeeze": lambda x: x.unsqueeze(0).squeeze((0, 1)),
    "permute": lambda x: x.permute(1, 0),
    "movedim": lambda x: x.movedim(0, 1),
    "transpose": lambda x: x.transpose(0, 1),
    "swapaxes": lambda x: x.swapaxes(0, 1),
    "t": lambda x: x.t(),
    "T": lambda x: x.T,
    "mT": lambda x: x.mT,
    "narrow": lambda x: x.narrow(1, 1, 2),
    "select": lambda x: x.select(1, 2),
    "unfold": lambda x: x.unfold(1, 2, 2),
    "unfold_overlapping": lambda x: x.unfold(0, 2, 1),
    "ravel": lambda x: x.ravel(),
    "diagonal": lambda x: x.diagonal(1),
    "split": lambda x: x.split(2, 1)[1],
    "chunk": lambda x: x.chunk(2)[1],
    "unbind": lambda x: x.unbind(1)[3],
    "tensor_split": lambda x: x.tensor_split([1, 3], 1)[1],
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_shares_memory_and_version(name):
    base = _x(3, 4)
    view = VIEWS[name](base)
    assert view._base is base
    assert np.shares_memory(view._data, base._data)
    before = _np(view).copy()
    base.add_(1)
    assert base._version == 1 and view._version == 1
    np.testing.assert_allclose(_np(view), before + 1)


@pytest.mark.parametrize("name", ["view", "flatten", "narrow", "select", "diagonal", "t",
                                  "movedim", "unflatten", "split", "unbind", "unfold",
                                  "ravel"])
def test_writing_through_a_view_changes_the_base(name):
    base = _x(3, 4)                     # random normal values: none is exactly zero
    view = VIEWS[name](base)
    view.mul_(0)
    assert base._version == 1 and view._version == 1
    assert np.count_nonzero(_np(base) == 0) == view.numel()
    assert np.all(_np(VIEWS[name](base)) == 0)


def test_real_view_writes_into_complex_base():
    base = ember.tensor([1 + 2j, 3 - 4j])
    base.real.mul_(0)               # (a real tensor's .real is the tensor itself)
    _same(base, np.array([2j, -4j]))
    assert base._version == 1


def test_imag_view_writes_into_complex_base():
    base = ember.tensor([1 + 2j, 3 - 4j])
    base.imag.mul_(0)
    _same(base, np.array([1 + 0j, 3 + 0j]))
    assert base._version == 1


def test_view_of_view_keeps_the_root_base():
    base = _x(3, 4)
    v = base.narrow(0, 1, 2).t().unsqueeze(0)
    assert v._base is base
    base.zero_()
    assert float(v.abs().sum()) == 0 and v._version == base._version


COPIES = {
    "flip": lambda x: x.flip(0),
    "fliplr": lambda x: x.fliplr(),
    "flipud": lambda x: ember.flipud(x),
    "roll": lambda x: x.roll(1, 1),
    "repeat": lambda x: x.repeat(1, 1),
    "tile": lambda x: x.tile(1),
    "cat": lambda x: ember.cat([x]),
    "stack": lambda x: ember.stack([x]),
    "hstack": lambda x: ember.hstack([x]),
    "diag": lambda x: ember.diag(x),
    "diag_embed": lambda x: ember.diag_embed(x),
    "tril": lambda x: x.tril(),
    "diagonal_scatter": lambda x: ember.diagonal_scatter(x, x.diagonal()),
    "repeat_interleave": lambda x: x.repeat_interleave(1),
    "repeat_interleave_tensor": lambda x: x.repeat_interleave(ember.tensor([1, 1, 1]), 0),
    "reshape_noncontiguous": lambda x: x.t().reshape(-1),
    "flatten_noncontiguous": lambda x: x.t().flatten(),
}


@pytest.mark.parametrize("name", sorted(COPIES))
def test_copies_do_not_share_memory(name):
    base = _x(3, 4)
    out = COPIES[name](base)
    assert out._base is None
    assert not np.shares_memory(out._data, base._data)
    assert all(s >= 0 for s in out.stride()) and out.is_contiguous()


@pytest.mark.parametrize("fn, keeps_layout", [
    (lambda x: x.flip(0), True), (lambda x: x.flip(0, 1), True), (lambda x: x.fliplr(), True),
    (lambda x: x.flipud(), True), (lambda x: x.roll(1, 0), False),
    (lambda x: x.roll((1, -1), (0, 1)), False)])
def test_flips_and_rolls_never_have_negative_strides(fn, keeps_layout):
    for x in (_x(3, 4), _x(4, 3).t(),
              make_tensor(3, 4, dtype=ember.float32, noncontiguous=True)):
        out = fn(x)
        assert min(out.stride()) > 0
        assert all(s > 0 for s in out._data.strides)
        # PyTorch flips into empty_like(input) (preserve_format); rolls are contiguous
        assert out.stride() == (x.clone().stride() if keeps_layout else (4, 1))


def test_flip_copy_is_independent_of_input():
    x = _x(4)
    y = x.flip(0)
    expected = _np(x)[::-1].copy()
    x.zero_()
    _same(y, expected)


# --- gradients of multi-output ops ------------------------------------------------------------

MULTI = {info.name: info for info in join_db.OPS
         if info.name in ("split", "chunk", "unbind", "tensor_split")}


def _joined(fn, sample):
    def run(x):
        return ember.cat([o.reshape(-1) for o in fn(x, *sample.args, **sample.kwargs)])
    return run


@pytest.mark.parametrize("name", sorted(MULTI))
def test_multi_output_gradients(name):
    info = MULTI[name]
    fn = info.function()
    ember.manual_seed(0)
    for sample in info.sample_inputs(ember.float64, True):
        x = sample.input
        if x.numel() == 0:
            continue
        assert gradcheck(_joined(fn, sample), (x,)), sample
        assert gradgradcheck(_joined(fn, sample), (x,)), sample


@pytest.mark.parametrize("fn,used,expected", [
    (lambda x: x.split(1), 1, [[0, 0], [1, 1], [0, 0]]),
    (lambda x: x.chunk(3), 2, [[0, 0], [0, 0], [1, 1]]),
    (lambda x: x.unbind(), 0, [[1, 1], [0, 0], [0, 0]]),
    (lambda x: x.tensor_split([1, 2]), 1, [[0, 0], [1, 1], [0, 0]]),
])
def test_unused_outputs_get_zero_gradient(fn, used, expected):
    x = ember.ones(3, 2, requires_grad=True)
    fn(x)[used].sum().backward()
    _same(x.grad, np.array(expected, dtype=np.float32))


def test_overlapping_tensor_split_gradients_add_up():
    x = ember.ones(5, requires_grad=True)
    parts = x.tensor_split([4, 1])
    (parts[0].sum() + parts[2].sum()).backward()
    _same(x.grad, np.array([1, 2, 2, 2, 1], dtype=np.float32))


def test_cat_gradient_reaches_legacy_empty_input():
    a = _x(2, 3, requires_grad=True)
    e = ember.zeros(0, dtype=ember.float64, requires_grad=True)
    ember.cat([a, e], 1).sum().backward()
    _same(a.grad, np.ones((2, 3)))
    assert tuple(e.grad.shape) == (0,)


def test_cat_gradient_is_cast_back_to_each_input_dtype():
    a = ember.ones(2, dtype=ember.float32, requires_grad=True)
    b = ember.ones(3, dtype=ember.float64, requires_grad=True)
    out = ember.cat([a, b])
    assert out.dtype is ember.float64
    (out * ember.arange(5, dtype=ember.float64)).sum().backward()
    assert a.grad.dtype is ember.float32 and b.grad.dtype is ember.float64
    _same(a.grad, np.array([0, 1], dtype=np.float32))
    _same(b.grad, np.array([2, 3, 4], dtype=np.float64))


def test_tensor_iteration_unbinds():
    x = _x(3, 2)
    rows = list(x)
    assert len(rows) == 3 and all(r._base is x for r in rows)
    _same(rows[2], _np(x)[2])


# --- composites: tile, hstack/vstack/dstack, fliplr/flipud, broadcasting -------------------------

@pytest.mark.parametrize("shape,dims", [((2, 3), (2,)), ((2, 3), (2, 1, 2)), ((), (3,)),
                                        ((2, 3), ()), ((0, 2), (2, 2))])
def test_tile_matches_numpy(shape, dims):
    x = _x(*shape)
    _same(ember.tile(x, dims), np.tile(_np(x), dims))
    assert ember.tile(x, dims).grad_fn is None


def test_tile_gradient():
    x = _x(2, 3, requires_grad=True)
    assert gradcheck(lambda t: t.tile(2), (x,))
    assert gradgradcheck(lambda t: ember.tile(t, (2, 1, 2)), (x,))
    with pytest.raises(RuntimeError, match="negative dimension"):
        x.tile(-1)


STACKERS = [
    (ember.hstack, np.hstack),
    (ember.vstack, np.vstack),
    (ember.dstack, np.dstack),
]


@pytest.mark.parametrize("ours,theirs", STACKERS)
@pytest.mark.parametrize("shapes", [[(), ()], [(3,), (3,)], [(2, 3), (2, 3)], [(2,), (1, 2)],
                                    [(2, 3, 1), (2, 3, 1)], [(3,), (0,), (3,)]])
def test_stackers_match_numpy(ours, theirs, shapes):
    tensors = [_x(*s) for s in shapes]
    try:
        expected = theirs([_np(t) for t in tensors])
    except ValueError:
        with pytest.raises(RuntimeError, match="Sizes of tensors must match|same number of dim"):
            ours(tensors)
        return
    _same(ours(tensors), expected)


@pytest.mark.parametrize("ours,theirs", STACKERS)
def test_stackers_gradients_out_and_errors(ours, theirs):
    a, b = _x(3, requires_grad=True), _x(3, requires_grad=True)
    assert gradcheck(lambda p, q: ours([p, q]), (a, b))
    expected = ours([a.detach(), b.detach()])
    out = ember.empty(0, dtype=ember.float64)
    assert ours((a.detach(), b.detach()), out=out) is out
    _same(out, expected)
    with pytest.raises(RuntimeError, match=f"{ours.__name__} expects a non-empty TensorList"):
        ours([])


def test_hstack_promotes():
    out = ember.hstack([ember.tensor([1, 2]), ember.tensor([0.5])])
    assert out.dtype is ember.float32
    _same(out, np.array([1, 2, 0.5], dtype=np.float32))


def test_cat_and_stack_reject_empty_lists():
    with pytest.raises(ValueError, match=r"cat\(\): expected a non-empty list of Tensors"):
        ember.cat([])
    with pytest.raises(ValueError, match="expected a non-empty list of Tensors"):
        ember.concatenate(())
    with pytest.raises(RuntimeError, match="stack expects a non-empty TensorList"):
        ember.stack([])


def test_joins_name_what_is_not_a_tensor_as_pytorch_does():
    x = _x(2)
    for join in (ember.cat, ember.stack, ember.hstack):
        with pytest.raises(TypeError, match=r"^expected Tensor as element 1 in argument 0, but "
                                            r"got list$"):
            join([x, [1.0]])
    with pytest.raises(TypeError, match=r"^cat\(\): argument 'tensors' \(position 1\) must be "
                                        r"tuple of Tensors, not Tensor$"):
        ember.cat(x)
    with pytest.raises(TypeError, match=r"^stack\(\): argument 'tensors' \(position 1\) must "
                                        r"be tuple of Tensors, not int$"):
        ember.stack(5)


def test_cat_refuses_generators_takes_out():
    x = _x(2, 2)
    with pytest.raises(TypeError, match=r"must be tuple of Tensors, not generator"):
        ember.cat(t for t in (x, x))        # as torch's
    _same(ember.cat(tuple(t for t in (x, x))), np.concatenate([_np(x)] * 2))
    out = ember.empty(0, dtype=ember.float64)
    ember.stack([x, x], 1, out=out)
    _same(out, np.stack([_np(x)] * 2, 1))


def test_fliplr_flipud():
    x = _x(3, 4, 2)
    _same(x.fliplr(), np.fliplr(_np(x)))
    _same(ember.flipud(x), np.flipud(_np(x)))
    _same(ember.flipud(_x(3)), _np(_x(3))[::-1])
    with pytest.raises(RuntimeError, match=r"Input must be >= 2-d\."):
        ember.fliplr(_x(3))
    with pytest.raises(RuntimeError, match=r"Input must be >= 1-d\."):
        ember.tensor(1.).flipud()
    assert gradcheck(lambda t: t.fliplr(), (_x(2, 3, requires_grad=True),))


def test_broadcast_tensors():
    a, b = _x(2, 1, requires_grad=True), _x(3, requires_grad=True)
    p, q = ember.broadcast_tensors(a, b)
    assert p.shape == q.shape == (2, 3)
    _same(p, np.broadcast_to(_np(a), (2, 3)))
    assert p._base is a and q.stride() == (0, 1)
    assert ember.broadcast_tensors(a, a)[0] is a
    assert ember.broadcast_tensors() == ()
    assert gradcheck(lambda s, t: ember.broadcast_tensors(s, t)[0] * ember.broadcast_tensors(
        s, t)[1], (a, b))
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of "
                                           r"tensor b \(2\) at non-singleton dimension 1"):
        ember.broadcast_tensors(_x(2, 3), _x(2))
    with pytest.raises(TypeError, match="expected Tensor as element 0 in argument 0, but got list"):
        ember.broadcast_tensors([a, b])


def test_broadcast_shapes():
    assert ember.broadcast_shapes((2, 1), (3,)) == ember.Size([2, 3])
    assert ember.broadcast_shapes(2, (3, 1)) == (3, 2)
    assert ember.broadcast_shapes((0, 1), (1, 4)) == (0, 4)
    assert ember.broadcast_shapes() == ()
    assert isinstance(ember.broadcast_shapes((1,)), ember.Size)
    with pytest.raises(RuntimeError, match=r"Attempting to broadcast a dimension of length 3 at "
                                           r"-2! Mismatching argument at index 1 had \(3, 3\); "
                                           r"but expected shape should be broadcastable to "
                                           r"\[2, 3\]"):
        ember.broadcast_shapes((2, 3), (3, 3))
    with pytest.raises(ValueError, match="negative length"):
        ember.broadcast_shapes((-1,))


def test_as_methods():
    x = _x(2, 3, requires_grad=True)
    _same(x.view_as(ember.zeros(3, 2)), _np(x).reshape(3, 2))
    _same(x.t().reshape_as(ember.zeros(6)), _np(x).T.reshape(6))
    _same(x.expand_as(ember.zeros(4, 2, 3)), np.broadcast_to(_np(x), (4, 2, 3)))
    assert gradcheck(lambda t: t.expand_as(ember.zeros(2, 2, 3)), (x,))
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x.t().view_as(ember.zeros(6))


# --- transpose properties ---------------------------------------------------------------------

def test_transpose_properties():
    x = _x(2, 3, 4)
    _same(x.mT, np.swapaxes(_np(x), -1, -2))
    c = ember.tensor([[1 + 1j, 2], [3j, 4]])
    _same(c.H, np.conj(_np(c).T))
    _same(c.mH, np.conj(_np(c).T))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _same(_x(2, 3).T, _np(_x(2, 3)).T)      # no warning for matrices
        assert ember.ones(3).T.shape == (3,)    # nor (in PyTorch 2.x) for vectors
    with pytest.warns(UserWarning, match="The use of `x.T` on tensors of dimension other than 2"):
        _same(x.T, _np(x).T)
    with pytest.warns(UserWarning, match="Tensor.T is deprecated on 0-D tensors"):
        assert ember.tensor(1.).T.shape == ()
    with pytest.warns(UserWarning, match="Tensor.mT is deprecated on 0-D tensors"):
        assert ember.tensor(1.).mT.shape == ()
    with pytest.warns(UserWarning, match=r"Tensor.H is deprecated on 0-D tensors. Consider using "
                                         r"x.conj\(\)"):
        assert ember.tensor(1j).H.item() == -1j
    with pytest.warns(UserWarning, match="Tensor.mH is deprecated on 0-D tensors"):
        assert ember.tensor(1.).mH.shape == ()
    with pytest.raises(RuntimeError, match="tensor.mT is only supported on matrices or batches "
                                           "of matrices. Got 1-D tensor."):
        _ = _x(3).mT
    with pytest.raises(RuntimeError, match=r"tensor.H is only supported on matrices \(2-D "
                                           r"tensors\). Got 1-D tensor.$"):
        _ = _x(3).H
    with pytest.raises(RuntimeError, match="Got 3-D tensor. For batches of matrices, consider "
                                           "using tensor.mH"):
        _ = x.H
    with pytest.raises(RuntimeError, match="tensor.mH is only supported on matrices"):
        _ = _x(3).mH


def test_t_on_small_tensors_is_identity_view():
    for x in (_x(3), ember.tensor(2.)):
        y = x.t()
        _same(y, _np(x))
        assert y._base is x


# --- conversion.py: complex gradients, in-place methods ----------------------------------------

def _c(*shape):
    ember.manual_seed(7)
    return ember.randn(shape, dtype=ember.complex128, requires_grad=True)


@pytest.mark.parametrize("fn", [lambda z: z.conj(), lambda z: z.real, lambda z: z.imag,
                                lambda z: z.real * z.imag, lambda z: z.clone(),
                                lambda z: z.to(ember.float64), lambda z: z.H])
def test_complex_gradients(fn):
    z = _c(2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # complex -> real casts warn
        assert gradcheck(fn, (z,))
        assert gradgradcheck(fn, (z,))


def test_complex_to_real_cast_warns():
    with pytest.warns(UserWarning, match="Casting complex values to real discards the "
                                         "imaginary part"):
        out = ember.tensor([1 + 2j]).to(ember.float32)
    _same(out, np.array([1.0], dtype=np.float32))


def test_copy_and_fill_methods_work_in_place():
    x = ember.zeros(2, 3)
    src = ember.arange(3, dtype=ember.float64)
    assert x.copy_(src) is x and x._version == 1 and x.dtype is ember.float32
    _same(x, np.tile(np.arange(3, dtype=np.float32), (2, 1)))
    assert x.fill_(2.5) is x and x._version == 2
    _same(x, np.full((2, 3), 2.5, dtype=np.float32))
    view = x[0] if hasattr(ember.Tensor, "__getitem__") else x.select(0, 0)
    view.fill_(1)
    _same(x, np.array([[1, 1, 1], [2.5, 2.5, 2.5]], dtype=np.float32))


def test_copy_gradient_flows_to_source_summed_over_broadcast():
    src = _x(3, requires_grad=True)
    dst = ember.zeros(2, 3, dtype=ember.float64)
    y = dst.copy_(src)
    (y * ember.arange(6, dtype=ember.float64).view(2, 3)).sum().backward()
    _same(src.grad, np.array([3, 5, 7], dtype=np.float64))


def test_tril_in_place_on_a_view_writes_the_base():
    base = ember.ones(2, 3, 3)
    base.select(0, 1).triu_(1)
    expected = np.ones((2, 3, 3), dtype=np.float32)
    expected[1] = np.triu(expected[1], 1)
    _same(base, expected)


def test_varargs_methods_take_the_keyword_form_and_require_an_argument():
    x = ember.ones(2, 3)
    assert x.view(size=(3, 2)).shape == (3, 2) and x.flip(dims=[0]).shape == (2, 3)
    assert x.permute(dims=(1, 0)).shape == (3, 2)
    with pytest.raises(TypeError, match='missing 1 required positional arguments: "dims"'):
        x.flip()
    with pytest.raises(TypeError, match="multiple values for argument 'dims'"):
        x.permute(0, dims=(1, 0))
    with pytest.raises(TypeError, match=r"^view\(\) received an invalid combination of "
                                        r"arguments - got \(int, size=tuple\)"):
        x.view(6, size=(6,))            # (PyTorch's view parses its two overloads)


# --- unfold, ravel, repeat_interleave, sum_to_size, is_same_size -------------------------------

def test_unfold_is_a_method_only_and_keeps_nn_functional_unfold():
    assert not hasattr(ember, "unfold")         # as in PyTorch: Tensor.unfold only
    x = ember.arange(12.0).view(3, 4)
    u = x.unfold(1, 2, 1)
    assert u.shape == (3, 3, 2) and u.stride() == (4, 1, 1) and u.storage_offset() == 0
    assert u.tolist()[1] == [[4.0, 5.0], [5.0, 6.0], [6.0, 7.0]]
    assert x.unfold(0, 2, 1).stride() == (4, 1, 4)
    assert ember.tensor(5.0).unfold(0, 1, 1).stride() == (1,)
    assert x.unfold(dimension=1, size=3, step=2).shape == (3, 1, 3)
    images = ember.arange(16.0).view(1, 1, 4, 4)     # im2col is another op of the same name
    assert ember.nn.functional.unfold(images, 2).shape == (1, 4, 9)


def test_unfold_gradient_adds_up_overlapping_windows():
    a = ember.arange(5.0, requires_grad=True)
    (a.unfold(0, 3, 1) * ember.arange(9.0).view(3, 3)).sum().backward()
    assert a.grad.tolist() == [0.0, 4.0, 12.0, 12.0, 8.0]      # as PyTorch
    assert a.unfold(0, 2, 2).grad_fn.name() == "UnfoldBackward0"


def test_ravel_is_contiguous_and_a_view_when_it_can_be():
    x = _x(3, 4)
    assert x.ravel()._base is x and ember.ravel(x).shape == (12,)
    r = x.t().ravel()
    assert r.is_contiguous() and not np.shares_memory(r._data, x._data)
    _same(r, _np(x).T.ravel())
    strided = ember.arange(6.0)[::2]
    assert strided.reshape(-1).stride() == (2,) and strided.ravel().stride() == (1,)
    assert ember.ravel(ember.tensor(1.0)).shape == (1,)
    with pytest.raises(TypeError, match=r"ravel\(\): argument 'input' \(position 1\) must be "
                                        r"Tensor, not list"):
        ember.ravel([1, 2])


def test_repeat_interleave_forms():
    x = ember.tensor([[1, 2], [3, 4]])
    assert x.repeat_interleave(2).tolist() == [1, 1, 2, 2, 3, 3, 4, 4]
    assert ember.repeat_interleave(x, 3, dim=1).tolist() == [[1, 1, 1, 2, 2, 2],
                                                            [3, 3, 3, 4, 4, 4]]
    assert x.repeat_interleave(ember.tensor([1, 2]), dim=0, output_size=3).tolist() == \
        [[1, 2], [3, 4], [3, 4]]
    # repeat_interleave(repeats) gives the indices; int32 counts give int32 indices
    idx = ember.repeat_interleave(ember.tensor([2, 0, 1], dtype=ember.int32))
    assert idx.tolist() == [0, 0, 2] and idx.dtype is ember.int32
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'repeats'"):
        x.repeat_interleave()           # the method has no one-argument form
    with pytest.raises(TypeError) as caught:     # no overload takes an int first (PyTorch's)
        ember.repeat_interleave(3, ember.tensor([2]))
    assert str(caught.value).splitlines()[:2] == [
        "repeat_interleave() received an invalid combination of arguments - got (int, Tensor), "
        "but expected one of:",
        " * (Tensor input, Tensor repeats, int dim = None, *, int output_size = None)"]


def test_repeat_interleave_gradients_sum_the_copies():
    weights = ember.arange(6.0).view(2, 3)
    a = ember.arange(6.0).view(2, 3).requires_grad_()
    (a.repeat_interleave(ember.tensor([2, 0, 1]), 1) * weights).sum().backward()
    assert a.grad.tolist() == [[1.0, 0.0, 2.0], [7.0, 0.0, 5.0]]       # as PyTorch
    a.grad = None
    (a.repeat_interleave(2) * ember.arange(12.0)).sum().backward()
    assert a.grad.tolist() == [[1.0, 5.0, 9.0], [13.0, 17.0, 21.0]]


def test_sum_to_size():
    x = ember.arange(6.0).view(2, 3)
    assert x.sum_to_size(3).tolist() == [3.0, 5.0, 7.0]
    assert x.sum_to_size(2, 1).tolist() == [[3.0], [12.0]]
    assert x.sum_to_size((1, 1)).tolist() == [[15.0]]
    assert x.sum_to_size(size=[1, 3]).shape == (1, 3)
    assert x.sum_to_size(ember.Size([2, 3])) is x          # nothing to sum: self, as PyTorch
    assert ember.zeros(0, 3).sum_to_size(1, 3).tolist() == [[0.0, 0.0, 0.0]]
    assert ember.tensor([1, 2, 3], dtype=ember.int32).sum_to_size(1).dtype is ember.int64
    assert ember.tensor([1.0, 2.0], dtype=ember.float16).sum_to_size(1).dtype is ember.float16
    for bad in ((4,), (1, 2, 3), (2,), (-1,), (0,)):
        with pytest.raises(RuntimeError, match=rf"size {{\{list(bad)}}} is not expandable to "
                                               rf"size {{\[2, 3\]}}\."):
            x.sum_to_size(*bad)
    with pytest.raises(RuntimeError, match=r"size {\[1\]} is not expandable to size {\[\]}\."):
        ember.tensor(5.0).sum_to_size(1)
    with pytest.raises(TypeError, match='missing 1 required positional arguments: "size"'):
        x.sum_to_size()
    with pytest.raises(TypeError, match="argument 'size' \\(position 1\\) must be tuple of ints, "
                                        "not float"):
        x.sum_to_size(2.0)


def test_sum_to_size_gradient_is_broadcast_back():
    s = ember.ones(2, 3, 4, requires_grad=True)
    y = s.sum_to_size(3, 1)
    assert y.tolist() == [[8.0], [8.0], [8.0]]
    (y * ember.tensor([[1.0], [2.0], [3.0]])).sum().backward()
    assert s.grad[1].tolist() == [[1.0] * 4, [2.0] * 4, [3.0] * 4]


def test_is_same_size():
    x = ember.zeros(2, 3)
    assert x.is_same_size(ember.ones(2, 3, dtype=ember.int64))
    assert not ember.is_same_size(x, ember.zeros(3, 2))
    with pytest.raises(TypeError, match=r"is_same_size\(\): argument 'other' \(position 2\) "
                                        r"must be Tensor, not int"):
        ember.is_same_size(x, 3)
    with pytest.raises(TypeError, match=r"argument 'other' \(position 1\) must be Tensor, not "
                                        r"list"):
        x.is_same_size([2, 3])


@pytest.mark.parametrize("fn", [
    lambda x: x.unfold(1, 2, 1), lambda x: x.unfold(-2, 1, 2),
    lambda x: x.repeat_interleave(2, 0), lambda x: x.repeat_interleave(ember.tensor([1, 2]), 0),
    lambda x: x.repeat_interleave(2), lambda x: x.repeat_interleave(ember.tensor([3]), -1),
    lambda x: x.ravel(), lambda x: x.sum_to_size(1, 4),
], ids=["unfold", "unfold_negative", "repeat_interleave", "repeat_interleave_tensor",
        "repeat_interleave_flat", "repeat_interleave_broadcast", "ravel", "sum_to_size"])
def test_vmap_rules_match_a_loop(fn):
    from ember.func import vmap
    x = _x(3, 2, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a batching rule, not the loop fallback
        got = vmap(fn)(x)
    _same(got, ember.stack([fn(x[i]) for i in range(3)]))


@pytest.mark.parametrize("call, where, pos", [
    (lambda x: x.view(1, 4.0), "view(): argument 'size'", 2),
    (lambda x: x.reshape((2, 2.0)), "reshape(): argument 'shape'", 2),
    (lambda x: x.expand(2, 2.5), "expand(): argument 'size'", 2),
    (lambda x: x.permute(0, 1.0), "permute(): argument 'dims'", 2),
    (lambda x: x.roll((1, 1.0)), "roll(): argument 'shifts'", 2),
    (lambda x: x.repeat(2, 1.0), "repeat(): argument 'repeats'", 2),
    (lambda x: x.tile(2, 2.0), "tile(): argument 'dims'", 2),
    (lambda x: x.movedim((0, 0.0), (0, 1)), "movedim(): argument 'source'", 2),
    (lambda x: x.squeeze((0, 0.0)), "squeeze(): argument 'dim'", 2),
    (lambda x: x.unflatten(0, (2, 1.0)), "unflatten(): argument 'sizes'", 2)])
def test_sizes_and_dims_must_be_ints_not_floats(call, where, pos):
    # int() would truncate: expand(2, 2.5) once gave a (2, 2) view
    with pytest.raises(TypeError, match=re.escape(
            f"{where} failed to unpack the object at pos {pos} with error \"type must be tuple "
            f"of ints,but got float\"")):
        call(ember.zeros(2, 2))


def test_integer_likes_are_sizes():
    x = ember.zeros(2, 2)
    assert x.view(np.int64(4)).shape == (4,) and x.view(ember.tensor(4)).shape == (4,)
    assert x.expand(np.int32(3), 2, 2).shape == (3, 2, 2)


def test_split_sizes_must_be_ints():
    with pytest.raises(TypeError, match=re.escape(
            "split_with_sizes(): argument 'split_sizes' (position 2) must be tuple of ints, but "
            "found element of type float at pos 0")):
        ember.zeros(3).split([1.5, 1.5])


@pytest.mark.parametrize("call, message", [
    (lambda x: x.narrow(1, 0.5, 1), "narrow() received an invalid combination of arguments - "
                                    "got (int, float, int), but expected one of:"),
    (lambda x: x.select(0, 1.0), "select(): argument 'index' (position 2) must be int, not float"),
    (lambda x: x.chunk(2.0), "chunk(): argument 'chunks' (position 1) must be int, not float"),
    (lambda x: x.topk(True), "topk(): argument 'k' (position 1) must be int, not bool"),
    (lambda x: x.tril(0.5), "tril(): argument 'diagonal' (position 1) must be int, not float"),
    (lambda x: x.triu(True), "triu(): argument 'diagonal' (position 1) must be int, not bool"),
    (lambda x: ember.nn.functional.one_hot(ember.tensor([1]), 3.0),
     "one_hot(): argument 'num_classes' (position 2) must be int, not float"),
    (lambda x: ember.randint(0, 10.5, (2,)), "randint() received an invalid combination of "
                                            "arguments - got (int, float, tuple), but expected"),
    (lambda x: ember.linspace(0, 1, 3.0), "linspace(): argument 'steps' must be int, not float")])
def test_int_arguments_refuse_floats_and_bools(call, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        call(ember.arange(6.0).reshape(2, 3))


def test_int_arguments_take_integer_tensors():
    x = ember.arange(6.0).reshape(2, 3)
    assert x.narrow(1, ember.tensor(1), 2).tolist() == [[1.0, 2.0], [4.0, 5.0]]
    assert x.select(0, ember.tensor(1)).tolist() == [3.0, 4.0, 5.0]
    assert x.tril(np.int64(-1)).tolist() == [[0.0, 0.0, 0.0], [3.0, 0.0, 0.0]]


def test_view_as_a_dtype_reads_the_same_bytes():
    x = ember.tensor([1.0, -2.0], requires_grad=True)
    bits = x.view(ember.int32)
    assert bits.tolist() == [0x3F800000, -0x40000000] and not bits.requires_grad
    assert x.view(ember.float16).shape == (4,) and x.view(dtype=ember.uint8).shape == (8,)
    assert ember.zeros(2, 4).view(ember.float64).shape == (2, 2)
    base = ember.zeros(2)
    base.view(ember.int32)[0] = 0x3F800000        # writes through the shared memory
    assert base.tolist() == [1.0, 0.0]


@pytest.mark.parametrize("make, message", [
    (lambda: ember.zeros(3, 2).t().view(ember.float16),
     "self.stride(-1) must be 1 to view Float as Half (different element sizes), but got 2"),
    (lambda: ember.zeros(3).view(ember.float64),
     "self.size(-1) must be divisible by 2 to view Float as Double (different element sizes), "
     "but got 3"),
    (lambda: ember.zeros(5)[1:].view(ember.float64),
     "self.storage_offset() must be divisible by 2 to view Float as Double (different element "
     "sizes), but got 1"),
    (lambda: ember.zeros(()).view(ember.float16),
     "self.dim() cannot be 0 to view Float as Half (different element sizes)"),
])
def test_view_as_a_dtype_of_another_size_checks_the_layout(make, message):
    with pytest.raises(RuntimeError) as info:
        make()
    assert str(info.value) == message


def test_expand_reports_the_innermost_mismatch_first():
    with pytest.raises(RuntimeError, match=r"The expanded size of the tensor \(5\) must match "
                                           r"the existing size \(3\) at non-singleton "
                                           r"dimension 1\.  Target sizes: \[2, 5\]"):
        ember.ones(3, 3).expand(2, 5)
    assert ember.ones(3, 1).expand(2, -1, 4).shape == (2, 3, 4)


def test_dim_type_errors_name_the_op_and_the_position_of_its_form():
    t = ember.ones(2, 6)
    with pytest.raises(TypeError, match=re.escape("unflatten(): argument 'dim' (position 1) "
                                                  "must be int, not str")):
        t.unflatten("a", (2, 3))
    with pytest.raises(TypeError, match=re.escape("unflatten(): argument 'dim' (position 2) "
                                                  "must be int, not str")):
        ember.unflatten(t, "a", (2, 3))
    with pytest.raises(TypeError, match=re.escape("unsqueeze_(): argument 'dim' (position 1) "
                                                  "must be int, not float")):
        t.unsqueeze_(1.5)
    with pytest.raises(TypeError, match=re.escape("transpose(): argument 'dim1' (position 3)")):
        ember.transpose(t, 0, "a")
