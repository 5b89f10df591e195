"""Round 29: grid_sample's one node (GridSampler2DBackward0 and its saved values), the
``_raw_saved_*`` of a number operand, of linear's mat2 and of x[idx]'s indices, nll_loss's
unreduced total_weight, gradient layouts (a leaf's size-1 dims, cross_entropy on strided
logits), and out= refusals in PyTorch's words (values as PyTorch 2.13 gives them)."""

import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def _leaf(*shape, dtype=ember.float32):
    n = int(np.prod(shape))
    return ember.tensor(np.sin(np.arange(n) * 0.7 + 0.3).reshape(shape), dtype=dtype,
                        requires_grad=True)


def _grid(*shape, dtype=ember.float32):
    n = int(np.prod(shape))
    return ember.tensor(np.cos(np.arange(n) * 1.3) * 0.9, dtype=dtype).reshape(shape)


# --- grid_sample: one node --------------------------------------------------------------------

@pytest.mark.parametrize("mode,code", [("bilinear", 0), ("nearest", 1), ("bicubic", 2)])
def test_grid_sample_node_saves_input_grid_and_mode_codes(mode, code):
    x, g = _leaf(1, 2, 3, 4), _grid(1, 2, 2, 2).requires_grad_()
    y = F.grid_sample(x, g, mode=mode, padding_mode="reflection", align_corners=True)
    node = y.grad_fn
    assert type(node).__name__ == "GridSampler2DBackward0"
    assert [a for a in dir(node) if a.startswith(("_saved", "_raw"))] == [
        "_raw_saved_grid", "_raw_saved_input", "_saved_align_corners", "_saved_grid",
        "_saved_input", "_saved_interpolation_mode", "_saved_padding_mode"]
    assert node._saved_input is x and ember.equal(node._saved_grid, g)
    assert (node._saved_interpolation_mode, node._saved_padding_mode,
            node._saved_align_corners) == (code, 2, True)
    assert [type(n).__name__ for n, _ in node.next_functions] == ["AccumulateGrad"] * 2


def test_grid_sample_3d_node_and_an_input_without_grad():
    x = _leaf(1, 1, 2, 3, 4)
    y = F.grid_sample(x, _grid(1, 2, 1, 2, 3), align_corners=False)
    node = y.grad_fn
    assert type(node).__name__ == "GridSampler3DBackward0"
    assert node.next_functions[1] == (None, 0)
    assert (node._saved_interpolation_mode, node._saved_padding_mode,
            node._saved_align_corners) == (0, 0, False)


def test_grid_sample_packs_grid_then_input():
    seen = []

    def pack(t):
        seen.append(tuple(t.shape))
        return t
    x, g = _leaf(1, 2, 3, 4), _grid(1, 2, 2, 2).requires_grad_()
    with ember.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = F.grid_sample(x, g, align_corners=False)
    assert seen == [(1, 2, 2, 2), (1, 2, 3, 4)]
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.grad_fn._saved_input


def test_grid_sample_gradients_and_second_order():
    x = _leaf(1, 2, 3, 3, dtype=ember.float64)
    g = (_grid(1, 2, 2, 2, dtype=ember.float64) * 1.1).requires_grad_()
    fn = lambda a, b: F.grid_sample(a, b, padding_mode="border", align_corners=False)  # noqa
    assert ember.autograd.gradcheck(fn, (x, g))
    assert ember.autograd.gradgradcheck(fn, (x, g))
    # nearest: the grid's gradient is zeros, not None
    (gg,) = ember.autograd.grad(F.grid_sample(x, g, mode="nearest", align_corners=False).sum(),
                                g)
    assert ember.equal(gg, ember.zeros_like(g))


def test_grid_sample_under_vmap_is_one_call_per_batch_without_warning():
    x, g = _leaf(3, 1, 2, 3, 4).detach(), _grid(3, 1, 2, 2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ember.func.vmap(lambda a, b: F.grid_sample(a, b, align_corners=False))(x, g)
    expected = ember.stack([F.grid_sample(a, b, align_corners=False) for a, b in zip(x, g)])
    assert ember.equal(out, expected)


# --- _raw_saved_ of numbers, linear's mat2, x[idx]'s indices ---------------------------------

def test_raw_saved_number_operand_packs_a_0_dim_tensor_that_backward_reads():
    x = ember.ones(3, requires_grad=True)
    y = x * 2
    seen = []
    y.grad_fn._raw_saved_other.register_hooks(lambda t: seen.append(t) or t * 10, lambda t: t)
    assert seen[0].dtype is ember.int64 and seen[0].shape == () and seen[0].item() == 2
    assert y.grad_fn._saved_other.item() == 20
    with pytest.raises(RuntimeError, match="hooks have already been set"):
        y.grad_fn._raw_saved_other.register_hooks(lambda t: t, lambda t: t)
    y.sum().backward()
    assert x.grad.tolist() == [20.0, 20.0, 20.0]
    with pytest.raises(RuntimeError, match="after it has been freed"):
        y.grad_fn._raw_saved_other.register_hooks(lambda t: t, lambda t: t)
    z = x / 2.5
    assert "_raw_saved_other" in dir(z.grad_fn)
    z.grad_fn._raw_saved_other.register_hooks(lambda t: seen.append(t) or t, lambda t: t)
    assert seen[-1].dtype is ember.float64 and seen[-1].item() == 2.5


def test_raw_saved_bool_and_complex_number_operands_are_0_dim_tensors():
    x = ember.tensor([1.0, -2.0], requires_grad=True)
    assert x.mul(True).grad_fn._saved_other.dtype is ember.bool
    y = x / (1 + 2j)
    assert y.grad_fn._saved_other.dtype is ember.complex128
    y.grad_fn._raw_saved_other.register_hooks(lambda t: t * 2, lambda t: t)
    y.abs().sum().backward()        # d|x / (2 + 4j)|/dx = sign(x) / |2 + 4j|
    np.testing.assert_allclose(x.grad.numpy(), [1 / 20 ** 0.5, -1 / 20 ** 0.5], rtol=1e-6)


def test_raw_saved_linear_mat2_packs_the_weight_transposed():
    w = ember.ones(3, 5, requires_grad=True)
    x = ember.ones(2, 5, requires_grad=True)
    for bias in (None, ember.zeros(3)):
        x.grad = None
        y = F.linear(x, w, bias)
        seen = []
        y.grad_fn._raw_saved_mat2.register_hooks(lambda t: seen.append(t) or t * 2,
                                                 lambda t: t)
        assert tuple(seen[0].shape) == (5, 3) and seen[0].stride() == (1, 5)
        assert y.grad_fn._saved_mat2.shape == (5, 3)
        y.sum().backward()
        assert x.grad.tolist() == [[6.0] * 5] * 2     # (the hooked mat2 is 2 * weight.t())


def test_raw_saved_indices_one_per_index_entry():
    x = ember.arange(20.).reshape(4, 5).requires_grad_()
    y = x[:, ember.tensor([0, 2])]
    raw = y.grad_fn._raw_saved_indices
    assert type(raw) is tuple and len(raw) == 2
    with pytest.raises(RuntimeError, match="with value None is forbidden"):
        raw[0].register_hooks(lambda t: t, lambda t: t)
    raw[1].register_hooks(lambda t: t, lambda t: ember.tensor([1, 3]))
    assert y.grad_fn._saved_indices[1].tolist() == [1, 3]
    y.sum().backward()
    assert x.grad[0].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]


def test_nll_loss_total_weight_is_zero_unreduced():
    x = _leaf(4, 5)
    t = ember.tensor([0, 2, -100, 4])
    for weight in (None, ember.rand(5)):
        node = F.nll_loss(x, t, weight=weight, reduction="none").grad_fn
        assert node._saved_total_weight.item() == 0.0
    assert F.nll_loss(x, t).grad_fn._saved_total_weight.item() == 3.0


def test_nll_and_cross_entropy_pack_the_total_weight_after_their_inputs():
    x, t, w = _leaf(4, 5), ember.tensor([0, 2, -100, 4]), ember.ones(5) * 2
    for loss, shapes in ((lambda: F.nll_loss(x, t, weight=w), [(4, 5), (4,), (5,), ()]),
                         (lambda: F.cross_entropy(x, t), [(4, 5), (4, 5), (4,), ()])):
        packed, unpacked = [], []
        with ember.autograd.graph.saved_tensors_hooks(
                lambda v: packed.append(v) or v, lambda v: unpacked.append(v.shape) or v):
            y = loss()
        assert [tuple(v.shape) for v in packed] == shapes
        assert packed[-1].item() == (6.0 if len(shapes) == 4 and shapes[2] == (5,) else 3.0)
        assert y.grad_fn._saved_total_weight is packed[-1]
        y.backward()
        assert () in unpacked               # (backward reads it back, as PyTorch's does)
    # a node whose other saved tensor has hooks of its own reads its kept total as it was
    y = F.nll_loss(x, t)
    y.grad_fn._raw_saved_target.register_hooks(lambda v: v, lambda v: v)
    assert y.grad_fn._saved_total_weight.item() == 3.0
    y.backward()


# --- layouts ----------------------------------------------------------------------------------

@pytest.mark.parametrize("make,loss,strides", [
    (lambda: ember.randn(1, 4, 3).permute(2, 0, 1), lambda x: (x * 2).sum(), (1, 12, 3)),
    (lambda: ember.randn(20).as_strided((3, 1, 4), (1, 7, 3)), lambda x: x.sum() * 2,
     (1, 7, 3)),
    (lambda: ember.randn(20).as_strided((3, 1, 4), (4, 100, 1)), lambda x: x.sum() * 2,
     (4, 100, 1)),
    # a row-major gradient obeys the contract (size-1 dims aside): taken as it is
    (lambda: ember.randn(20).as_strided((3, 1, 4), (4, 100, 1)), lambda x: (x * 2).sum(),
     (4, 4, 1)),
    (lambda: ember.randn(3, 1, 1).expand(3, 1, 4), lambda x: x.sum() * 2, (4, 4, 1))])
def test_leaf_gradient_keeps_the_leafs_strides_at_size_1_dims(make, loss, strides):
    x = make().detach().requires_grad_()
    loss(x).backward()
    assert x.grad.stride() == strides and ember.equal(x.grad, ember.full((3, 1, 4), 2.0))


def test_leaf_gradient_under_create_graph_takes_the_leafs_strides_at_size_1_dims():
    # building a graph, the gradient is copied into the leaf's own strides, never taken over
    x = ember.randn(3, 4, 1).permute(0, 2, 1).detach().requires_grad_()   # (4, 1, 1)
    (x * 1).backward(ember.ones(3, 1, 4), create_graph=True)
    assert x.grad.stride() == (4, 1, 1) and ember.equal(x.grad, ember.ones(3, 1, 4))


@pytest.mark.parametrize("make", [lambda: ember.randn(5, 3).t(),
                                  lambda: ember.randn(2, 4, 5).permute(0, 2, 1)])
def test_cross_entropy_gradient_is_row_major_for_strided_logits(make):
    x = make().detach().requires_grad_()
    t = ember.tensor([0, 2, 1]) if x.ndim == 2 else ember.tensor([[0, 1, 2, 3]] * 2)
    (g,) = ember.autograd.grad(F.cross_entropy(x, t), x)
    assert g.is_contiguous()
    (ref,) = ember.autograd.grad(F.cross_entropy(x.contiguous(), t), x)
    assert ember.allclose(g, ref)


# --- out= refusals in PyTorch's words ---------------------------------------------------------

@pytest.mark.parametrize("call,kernel", [
    (lambda x, o: ember.square(x, out=o), "pow"),
    (lambda x, o: ember.fft.rfft(x, out=o.to(ember.complex64)), "_fft_r2c"),
    (lambda x, o: ember.fft.fft2(x, out=o.to(ember.complex64)), "_fft_c2c"),
    (lambda x, o: ember.linalg.inv(x, out=o), "linalg_inv_ex"),
    (lambda x, o: ember.special.i1(x, out=o), "special_i1"),
    (lambda x, o: ember.msort(x, out=o), "sort")])
def test_out_with_grad_is_refused_in_the_kernels_name(call, kernel):
    x = (ember.eye(3) * 2).requires_grad_()
    with pytest.raises(RuntimeError, match=rf"^{kernel}\(\): functions with out=\.\.\. "):
        call(x, ember.empty(0))


def test_out_of_an_op_without_derivative_is_written_untracked():
    x = ember.tensor([1.0, -2.0], requires_grad=True)
    out = ember.empty(0, dtype=ember.bool)
    assert ember.gt(x, 0, out=out) is out and out.tolist() == [True, False]
    assert not out.requires_grad
    out = ember.empty(0)
    ember.special.bessel_j0(x, out=out)
    assert not out.requires_grad and abs(out[0].item() - 0.7651976866) < 1e-6
    # nonzero (declared not differentiable), searchsorted, the special polynomials likewise
    out = ember.empty(0, dtype=ember.long)
    assert ember.nonzero(x, out=out).tolist() == [[0], [1]] and not out.requires_grad
    assert ember.searchsorted(ember.tensor([0.0, 1.0]), x, out=out).tolist() == [1, 0]
    out = ember.empty(0)
    ember.special.chebyshev_polynomial_t(x, 2, out=out)     # 2x^2 - 1
    assert out.tolist() == [1.0, 7.0] and not out.requires_grad


@pytest.mark.parametrize("call,error,message", [
    (lambda x, o: ember.cat([x, x], out=o), TypeError,
     "torch.cat(): input types can't be cast to the desired output type Int"),
    (lambda x, o: ember.linalg.tensorinv(x, 1, out=o), RuntimeError,
     "tensorinv: Expected result to be safely castable from Float dtype, but got result with "
     "dtype Int"),
    (lambda x, o: ember.diag(x[0], out=o), RuntimeError,
     "diag: result type Float can't be cast to the desired out= type Int"),
    (lambda x, o: ember.matmul(x[0], x[0], out=o), RuntimeError,
     "result dtype Int does not match input dtype Float"),
    # (review) a batch of matrices by a vector: addmv's words where the batch folds into one
    # matrix, bmm's where it cannot (expanded)
    (lambda x, o: ember.matmul(ember.stack([x, x]), x[0], out=o), RuntimeError,
     "addmv input tensors must have the same dtype, but got Int, Float, and Float"),
    (lambda x, o: ember.matmul(x.expand(2, 3, 3), x[0], out=o), RuntimeError,
     "Expected out tensor to have dtype float, but got int instead"),
    (lambda x, o: ember.float_power(x, 2, out=o), RuntimeError,
     "the output given to float_power has dtype Int but the operation's result requires "
     "dtype Double")])
def test_out_dtype_refusals_in_the_ops_words(call, error, message):
    x = ember.eye(3) * 2
    with pytest.raises(error) as info:
        call(x, ember.empty(0, dtype=ember.int32))
    assert str(info.value) == message


def test_vector_diag_casts_into_a_wider_out_only_safely():
    out = ember.empty(0, dtype=ember.float64)
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got "
                                           "double instead"):
        ember.diag(ember.ones(3), out=out)
