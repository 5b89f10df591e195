"""Regression tests for the bugs the round-37 shape-ops fuzzer found (values, layouts, node
names and errors as PyTorch 2.13 gives them)."""

import pytest

import ember


def _raises(error, text, fn):
    with pytest.raises(error) as info:
        fn()
    assert str(info.value).split("\n")[0] == text


# --- select_scatter, slice_scatter, diagonal_scatter -----------------------------------------

def test_select_scatter_is_an_op_with_its_own_node_and_gradients():
    x = ember.zeros(3, 4, dtype=ember.float64).t().requires_grad_()
    src = ember.ones(4, dtype=ember.float32, requires_grad=True)
    out = ember.select_scatter(x, src, 1, -1)
    assert type(out.grad_fn).__name__ == "SelectScatterBackward0"
    assert out.dtype == ember.float64 and out.stride() == (1, 4)    # x's (transposed) layout
    assert out[:, 2].tolist() == [1.0] * 4 and out[:, :2].abs().sum().item() == 0
    out.backward(ember.arange(12.).reshape(4, 3).double())
    assert x.grad.tolist() == [[0., 1., 0.], [3., 4., 0.], [6., 7., 0.], [9., 10., 0.]]
    assert src.grad.dtype == ember.float32 and src.grad.tolist() == [2., 5., 8., 11.]


def test_slice_scatter_node_out_and_step():
    x = ember.zeros(2, 5, requires_grad=True)
    out = x.slice_scatter(ember.ones(2, 2), dim=1, start=1, end=None, step=2)
    assert type(out.grad_fn).__name__ == "SliceScatterBackward0"
    assert out.tolist() == [[0., 1., 0., 1., 0.]] * 2
    buf = ember.full((1,), 7.)
    res = ember.slice_scatter(x.detach(), ember.ones(1, 5), 0, 0, 1, out=buf)
    assert res is buf and buf.tolist() == [[1.] * 5, [0.] * 5]
    _raises(RuntimeError, "Expected out tensor to have dtype float, but got double instead",
            lambda: ember.slice_scatter(x.detach(), ember.ones(1, 5), 0, 0, 1,
                                        out=ember.zeros(2, 5, dtype=ember.float64)))
    _raises(RuntimeError, "slice step must be positive",
            lambda: ember.slice_scatter(x, ember.ones(2, 5), 0, None, None, 0))
    _raises(IndexError, "slice() cannot be applied to a 0-dim tensor.",
            lambda: ember.slice_scatter(ember.zeros(()), ember.zeros(()), 0))
    _raises(TypeError, "select_scatter() got an unexpected keyword argument 'out'",
            lambda: ember.select_scatter(x, ember.ones(5), 0, 0, out=buf))


def test_scatters_refuse_complex_and_integral_results_needing_grad():
    g = ember.ones(2, 1, requires_grad=True)
    _raises(RuntimeError, "slice_scatter does not support automatic differentiation for "
            "outputs with complex dtype.",
            lambda: ember.slice_scatter(ember.zeros(2, 3, dtype=ember.complex64), g, 1, 0, 1))
    # a real result from a complex src that requires grad is differentiable
    c = ember.ones(2, 1, dtype=ember.complex128, requires_grad=True)
    assert ember.slice_scatter(ember.zeros(2, 3, dtype=ember.float64), c, 1, 0, 1).requires_grad
    _raises(RuntimeError, "Autograd not support dtype: Long",
            lambda: ember.select_scatter(ember.zeros(2, 3, dtype=ember.int64),
                                         ember.ones(3, requires_grad=True), 0, 0))
    _raises(RuntimeError, "Autograd not support dtype: Short",
            lambda: ember.diagonal_scatter(ember.zeros(2, 2, dtype=ember.int16),
                                           ember.ones(2, requires_grad=True)))


def test_diagonal_scatter_layout_and_argument_types():
    out = ember.diagonal_scatter(ember.zeros(3, 4).t(), ember.ones(3))
    assert out.stride() == (1, 4) and out.diagonal().tolist() == [1., 1., 1.]
    x, src = ember.zeros(3, 3), ember.ones(3)
    _raises(TypeError, "diagonal_scatter(): argument 'dim1' (position 4) must be int, not bool",
            lambda: ember.diagonal_scatter(x, src, 0, True, 1))
    _raises(TypeError, "diagonal_scatter(): argument 'dim1' must be int, not float",
            lambda: ember.diagonal_scatter(x, src, dim1=1.5))
    _raises(TypeError, "diag_embed(): argument 'dim1' (position 3) must be int, not bool",
            lambda: ember.diag_embed(x, -2, True, 1))


# --- tril, triu, rot90 -----------------------------------------------------------------------

def test_tril_triu_check_the_diagonal_first_and_are_row_major():
    _raises(TypeError, "tril(): argument 'diagonal' (position 2) must be int, not NoneType",
            lambda: ember.tril(ember.zeros(3), None))
    _raises(TypeError, "triu_(): argument 'diagonal' (position 1) must be int, not str",
            lambda: ember.zeros(()).triu_("1"))
    x = ember.arange(24.).reshape(2, 3, 4).transpose(0, 2)
    out = ember.tril(x)
    assert out.stride() == (6, 2, 1)
    assert out[1].tolist() == [[1., 0.], [5., 17.], [9., 21.]]


def test_rot90_is_an_op():
    x = ember.arange(6.).reshape(2, 3).requires_grad_()
    out = ember.rot90(x, 1, (0, 1))
    assert type(out.grad_fn).__name__ == "Rot90Backward0"
    assert out.tolist() == [[2., 5.], [1., 4.], [0., 3.]]
    out.backward(ember.arange(6.).reshape(3, 2))
    assert x.grad.tolist() == [[4., 2., 0.], [5., 3., 1.]]
    same = ember.rot90(x.detach().t(), -4)
    assert same.stride() == (2, 1) and same.tolist() == [[0., 3.], [1., 4.], [2., 5.]]
    _raises(TypeError, "rot90(): argument 'dims' (position 3) must be tuple of ints, not "
            "NoneType", lambda: ember.rot90(x, 1, None))


# --- splits, atleast, combinations -----------------------------------------------------------

def test_split_pieces_spanning_the_dim_are_slices():
    x = ember.arange(6.).requires_grad_()
    assert [type(t.grad_fn).__name__ for t in ember.tensor_split(x, [0, 6])] == \
        ["SliceBackward0"] * 3
    assert [type(t.grad_fn).__name__ for t in ember.hsplit(x, 1)] == ["SliceBackward0"]
    e = ember.zeros(1, 0, 5, requires_grad=True)
    assert [type(t.grad_fn).__name__ for t in e.chunk(2, 1)] == ["SplitWithSizesBackward0"] * 2
    assert [type(t.grad_fn).__name__ for t in e.chunk(2, 2)] == ["SplitBackward0"] * 2


def test_atleast_unsqueezes_vectors():
    v = ember.ones(3, requires_grad=True)
    assert type(ember.atleast_2d(v).grad_fn).__name__ == "UnsqueezeBackward0"
    out = ember.atleast_3d(v)
    assert out.shape == (1, 3, 1) and type(out.grad_fn).__name__ == "UnsqueezeBackward0"
    assert type(ember.atleast_3d(ember.ones((), requires_grad=True)).grad_fn).__name__ == \
        "ViewBackward0"


def test_combinations_is_a_stack():
    x = ember.tensor([1., 2., 3.], requires_grad=True)
    out = ember.combinations(x, 2)
    assert type(out.grad_fn).__name__ == "StackBackward0"
    assert out.tolist() == [[1., 2.], [1., 3.], [2., 3.]]
    out.sum().backward()
    assert x.grad.tolist() == [2., 2., 2.]


# --- the order of argument checks ------------------------------------------------------------

def test_argument_types_are_checked_first():
    z, v = ember.zeros(()), ember.zeros(4)
    _raises(TypeError, "concat(): argument 'dim' must be int, not tuple",
            lambda: ember.concat([z, v], dim=(0,)))
    _raises(TypeError, "chunk(): argument 'dim' (position 2) must be int, not NoneType",
            lambda: z.chunk(4, None))
    _raises(TypeError, "linalg_cross(): argument 'dim' must be int, not bool",
            lambda: ember.linalg.cross(z, ember.zeros(3), dim=True))
    _raises(TypeError, "cross(): argument 'dim' must be int, not str",
            lambda: ember.cross(z, ember.zeros(3), dim="0"))
    with pytest.raises(TypeError, match="tensor_split.. received an invalid combination"):
        ember.tensor_split(z, 2, True)
    _raises(RuntimeError, "tensor_split expected tensor_indices_or_sections to have dtype of "
            "long, but got Float",
            lambda: v.tensor_split(ember.tensor([1., 2.]), dim=4))


def test_checks_in_pytorchs_order():
    _raises(IndexError, "Dimension out of range (expected to be in range of [-1, 0], but got 3)",
            lambda: ember.stack([ember.zeros(()), ember.zeros(0)], 3))
    _raises(RuntimeError, "dim 0 appears multiple times in the list of dims",
            lambda: ember.zeros(2, 3).flip(0, 0, 5))
    _raises(IndexError, "Dimension out of range (expected to be in range of [-2, 1], but got 5)",
            lambda: ember.zeros(2, 3).squeeze((0, 5, 0)))
    _raises(NotImplementedError, "\"cross\" not implemented for 'Bool'",
            lambda: ember.linalg.cross(ember.ones(3, dtype=ember.bool), ember.ones(3)))
    _raises(NotImplementedError, "\"cross\" not implemented for 'Bool'",
            lambda: ember.cross(ember.ones(3, dtype=ember.bool), ember.ones(3), dim=0))
    _raises(RuntimeError, "shifts and dimensions must align. shifts: 1, dims:2",
            lambda: ember.roll(ember.zeros(3, 0), (1,), (0, 1)))
    assert ember.roll(ember.zeros(3, 0), 1, 5).shape == (3, 0)     # (no dim check when empty)
    _raises(RuntimeError, "Repeats must be non-negative",
            lambda: ember.zeros(()).repeat_interleave(-1, -1))
    _raises(RuntimeError, "chunk expects at least a 1-dimensional tensor",
            lambda: ember.zeros(()).chunk(0))
    _raises(RuntimeError, "chunk expects `chunks` to be greater than 0, got: 0",
            lambda: ember.zeros(3).chunk(0, 5))
    with pytest.raises(TypeError, match=r"got \(Tensor, Tensor, bool\), but expected one of"):
        ember.repeat_interleave(ember.zeros(()), ember.tensor([2]), True)


def test_a_conj_view_is_named_tensor_in_messages():
    _raises(TypeError, "cat(): argument 'tensors' (position 1) must be tuple of Tensors, not "
            "Tensor", lambda: ember.cat(ember.zeros(3, dtype=ember.complex64).conj()))
