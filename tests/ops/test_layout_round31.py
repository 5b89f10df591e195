"""Round 31 layouts: one-operand pointwise results over non-contiguous inputs with dims of
size 1 or 0 strides (PyTorch's TensorIterator order, its channels-last fast path, and the
preserve_format copy it lays out a cast operand by), mixed-dtype binary results, empty
``view_as_real`` strides, and nll_loss's graph for inputs of 3 or 5+ dims. Expected values
are PyTorch 2.13's (tests/parity/test_parity_leftovers_round31.py compares live)."""

import numpy as np
import pytest

import ember


def _base(shape, dtype=ember.float32):
    return ember.arange(int(np.prod(shape))).reshape(shape).to(dtype)


UNARY = [
    # (input builder, expected result strides)
    (lambda: _base((4, 6)).t().unsqueeze(1), (1, 24, 6)),
    (lambda: _base((4, 6)).t().unsqueeze(0), (6, 1, 6)),
    (lambda: _base((4, 6)).t().unsqueeze(2), (1, 6, 1)),
    (lambda: _base((4, 6))[:, ::2].t().unsqueeze(0), (3, 1, 3)),
    (lambda: _base((3, 1, 5))[::2].permute(0, 2, 1), (5, 1, 5)),
    (lambda: _base((2, 3, 4)).permute(0, 2, 1).unsqueeze(3), (12, 1, 4, 4)),  # channels-last
    (lambda: _base((1, 4, 6)).permute(2, 0, 1).expand(6, 2, 4), (1, 6, 12)),
]


_NP = {"exp": np.exp, "neg": np.negative, "sigmoid": lambda a: 1 / (1 + np.exp(-a))}


@pytest.mark.parametrize("case", range(len(UNARY)))
@pytest.mark.parametrize("name", sorted(_NP))
def test_unary_result_strides(case, name):
    build, want = UNARY[case]
    x = build()
    out = getattr(x, name)()
    assert out.stride() == want
    np.testing.assert_allclose(out.numpy(), _NP[name](x.numpy()), rtol=1e-6)


@pytest.mark.parametrize("dtype", [ember.int64, ember.float16])
def test_unary_strides_of_cast_operands(dtype):
    # an int64 input is cast first (a preserve_format copy, which PyTorch then lays out by);
    # a float16 one is computed in float32 by the kernel, laid out by the input itself
    x = _base((3, 1, 5), dtype)[:, :, ::2].permute(2, 1, 0)
    assert x.exp().stride() == (1, 3, 3)
    y = _base((4, 6), dtype).t().unsqueeze(1)
    assert y.exp().stride() == (1, 24, 6)
    z = _base((4, 6), dtype)[:, ::2].unsqueeze(1)
    assert z.exp().dtype == (ember.float32 if dtype == ember.int64 else ember.float16)
    assert z.exp().stride() == (3, 3, 1)


def test_unary_strides_of_a_fresh_16_bit_operand():
    # a cast's result is a fresh array (no base) yet not contiguous: a 16-bit operand is
    # checked whatever its base (PyTorch's strides, as tests/parity checks live)
    x = _base((2, 2, 3)).transpose(0, 2).unsqueeze(3).exp().transpose(1, 2).transpose(0, 1) \
        .to(ember.float16)
    assert x.stride() == (6, 1, 3, 1)
    assert x.neg().stride() == (6, 1, 3, 3)
    np.testing.assert_array_equal(x.neg().numpy(), -x.numpy())


def test_unary_dense_and_sliced_results_unchanged():
    x = _base((64, 64))
    assert x.exp().stride() == (64, 1)
    assert x[:, ::2].exp().stride() == (32, 1)
    assert x.t().exp().stride() == (1, 64)
    assert x[3:4].t().exp().stride() == (1, 1)      # contiguous: row-major in PyTorch too


BINARY = [
    # (a, b, expected strides of a + b)
    (lambda: _base((4, 6), ember.int64).t().unsqueeze(1), lambda: _base((6, 1, 4)),
     (1, 24, 6)),
    (lambda: _base((4,), ember.float16).unsqueeze(0),
     lambda: _base((4, 1), ember.int64).t().unsqueeze(1).expand(1, 3, 4), (1, 1, 3)),
    (lambda: _base((2, 3), ember.int32).t().unsqueeze(0), lambda: _base((1,), ember.float64),
     (3, 1, 3)),
    (lambda: _base((3, 4), ember.int64).t().unsqueeze(1),
     lambda: _base((4, 1, 3), ember.bfloat16), (1, 12, 4)),
    (lambda: _base((2, 3), ember.bool).t().unsqueeze(2),
     lambda: _base((3, 2), ember.float16).unsqueeze(2), (1, 3, 1)),
]


@pytest.mark.parametrize("case", range(len(BINARY)))
def test_mixed_dtype_binary_strides(case):
    a, b, want = BINARY[case]
    a, b = a(), b()
    out = a + b
    assert out.stride() == want
    np.testing.assert_array_equal(out.double().numpy(), a.double().numpy() + b.double().numpy())


@pytest.mark.parametrize("shape,slicer,want", [
    ((0,), None, ((0, 2), (2, 1))),
    ((2, 0), None, ((2, 0, 2), (2, 2, 1))),
    ((0, 3), None, ((0, 3, 2), (6, 2, 1))),
    ((3, 4), (slice(None), slice(0, 0)), ((3, 0, 2), (8, 2, 1))),
    ((5,), slice(0, 0, 2), ((0, 2), (4, 1))),
])
def test_view_as_real_of_empty(shape, slicer, want):
    x = ember.zeros(shape, dtype=ember.complex64)
    if slicer is not None:
        x = x[slicer]
    y = ember.view_as_real(x)
    assert (tuple(y.shape), y.stride()) == want
    assert y.dtype == ember.float32 and y.storage_offset() == 2 * x.storage_offset()


def test_view_as_real_of_empty_keeps_the_error_for_real_input():
    with pytest.raises(RuntimeError, match="view_as_real is only supported for complex"):
        ember.view_as_real(ember.zeros(0))


def _chain(fn):
    names = []
    while fn is not None:
        names.append(type(fn).__name__)
        nxt = [f for f, _ in fn.next_functions if f is not None]
        fn = nxt[0] if nxt else None
    return names


@pytest.mark.parametrize("shape,reduction,chain,saved", [
    ((2, 3, 4), "mean", ["NllLoss2DBackward0", "ViewBackward0", "AccumulateGrad"],
     (2, 3, 1, 4)),
    ((2, 3, 4), "none", ["ViewBackward0", "NllLoss2DBackward0", "ViewBackward0",
                         "AccumulateGrad"], (2, 3, 1, 4)),
    ((2, 3, 2, 2, 2), "sum", ["NllLoss2DBackward0", "ViewBackward0", "AccumulateGrad"],
     (2, 3, 1, 8)),
    ((2, 3, 4, 5), "mean", ["NllLoss2DBackward0", "AccumulateGrad"], (2, 3, 4, 5)),
    ((0, 3, 4), "mean", ["NllLoss2DBackward0", "ViewBackward0", "AccumulateGrad"],
     (0, 3, 0, 0)),
])
def test_nll_loss_graph_of_3d_and_5d_inputs(shape, reduction, chain, saved):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal(shape)
    ts = rng.integers(0, 3, shape[:1] + shape[2:])
    x = ember.tensor(xs, requires_grad=True)
    packed = []
    with ember.autograd.graph.saved_tensors_hooks(lambda a: packed.append(tuple(a.shape)) or a,
                                                  lambda a: a):
        y = ember.nn.functional.nll_loss(x, ember.tensor(ts), reduction=reduction)
    assert _chain(y.grad_fn) == chain
    assert packed[0] == saved
    node = y.grad_fn if reduction != "none" else y.grad_fn.next_functions[0][0]
    assert tuple(node._saved_self.shape) == saved
    # values and gradients as the flat reference: -x[n, t[n, ...], ...]
    picked = -np.take_along_axis(xs, ts[:, None], 1)[:, 0]
    want = {"mean": picked.mean() if picked.size else np.nan, "sum": picked.sum(),
            "none": picked}[reduction]
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-12)
    if x.numel():
        (g,) = ember.autograd.grad(y.sum(), x)
        expect = np.zeros(shape)
        np.put_along_axis(expect, ts[:, None], -1.0, 1)
        scale = 1 / picked.size if reduction == "mean" else 1
        np.testing.assert_allclose(g.numpy(), expect * scale, rtol=1e-12)


def test_nll_loss_permuted_3d_input_is_cloned_first():
    x = ember.randn(2, 4, 3, requires_grad=True)
    y = ember.nn.functional.nll_loss(x.transpose(1, 2), ember.zeros(2, 4, dtype=ember.long))
    assert _chain(y.grad_fn)[:4] == ["NllLoss2DBackward0", "ViewBackward0", "CloneBackward0",
                                     "TransposeBackward0"]
