"""Small fidelity items (round 26), checked without PyTorch: writes through uint8 masks,
adaptive average pooling of empty planes, ``grad_fn._saved_self_sym_sizes``, and the edges
of scaled_dot_product_attention with a float attn_mask.
"""

import warnings

import numpy as np
import pytest

import ember

_UINT8 = "indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead."


def _mask():
    return ember.tensor([1, 0, 1], dtype=ember.uint8)


# --- 1. uint8 masks ---------------------------------------------------------------------------

def test_uint8_mask_write_backward():
    x = ember.arange(3.0, requires_grad=True)
    v = ember.tensor([2.0, 3.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = x.clone()
        y[_mask()] = v
        (y * ember.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert y.tolist() == [2.0, 1.0, 3.0]
    assert x.grad.tolist() == [0.0, 10.0, 0.0] and v.grad.tolist() == [1.0, 100.0]
    assert [str(w.message) for w in caught] == [_UINT8] * 3


def test_uint8_mask_scalar_write_refused():
    y = ember.arange(3.0)
    with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks, but got "
                                           "mask with dtype unsigned char"):
        y[_mask()] = 0


def test_uint8_mask_scalar_write_under_vmap():
    def write(row):
        row = row.clone()
        row[_mask()] = 0.0
        return row
    data = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = ember.func.vmap(write)(ember.tensor(data))
    expected = data.copy()
    expected[:, [0, 2]] = 0.0
    np.testing.assert_array_equal(out.numpy(), expected)
    assert {str(w.message) for w in caught} == {_UINT8}


def test_uint8_mask_index_put_under_vmap_is_batched():
    def put(row):
        return row.index_put((_mask(),), ember.tensor(1.0), accumulate=True)
    data = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = ember.func.vmap(put)(ember.tensor(data))
    np.testing.assert_array_equal(out.numpy(), data + [1.0, 0.0, 1.0])
    assert {str(w.message) for w in caught} == {_UINT8}      # no per-example fallback


def test_bool_mask_index_put_under_vmap_checks_dtype():
    mask = ember.tensor([True, False, True])
    with pytest.raises(RuntimeError, match="Index put requires the source and destination "
                                           "dtypes match, got Float for the destination and "
                                           "Long for the source."):
        ember.func.vmap(lambda r: r.index_put((mask,), ember.tensor(5)))(ember.ones(2, 3))


# --- 2. adaptive average pooling of empty planes ----------------------------------------------

@pytest.mark.parametrize("nd,shape,expected", [
    (1, (2, 3, 0), (2, 3, 1)), (1, (3, 0), (3, 1)), (2, (2, 3, 4, 0), (2, 3, 1, 1)),
    (3, (2, 3, 0, 4, 4), (2, 3, 1, 1, 1)), (2, (0, 3, 0, 4), (0, 3, 1, 1)),
])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_adaptive_avg_pool_of_empty_plane_to_one_is_nan(nd, shape, expected, requires_grad):
    x = ember.ones(shape, requires_grad=requires_grad)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # NumPy's 0/0 warning must not escape
        out = getattr(ember.nn.functional, f"adaptive_avg_pool{nd}d")(x, 1)
        assert tuple(out.shape) == expected and np.isnan(out.detach().numpy()).all()
        if requires_grad:
            out.sum().backward()
            assert tuple(x.grad.shape) == shape


def test_adaptive_avg_pool_of_empty_complex_plane():
    out = ember.nn.functional.adaptive_avg_pool2d(ember.ones(2, 0, 3, dtype=ember.complex64), 1)
    values = out.numpy()
    assert values.shape == (2, 1, 1) and np.isnan(values.real).all() and np.isnan(values.imag).all()


@pytest.mark.parametrize("nd,shape,size", [(1, (2, 3, 0), 2), (2, (2, 3, 0, 4), (1, 2)),
                                           (3, (1, 2, 2, 0), 2)])
def test_adaptive_avg_pool_of_empty_plane_to_more_raises(nd, shape, size):
    with pytest.raises(RuntimeError, match="Expected input to have non-zero size for non-batch "
                                           "dimensions"):
        getattr(ember.nn.functional, f"adaptive_avg_pool{nd}d")(ember.ones(shape), size)


def test_adaptive_avg_pool_to_empty_output():
    out = ember.nn.functional.adaptive_avg_pool2d(ember.ones(2, 3, 4, 4, dtype=ember.int64), (0, 2))
    assert tuple(out.shape) == (2, 3, 0, 2) and out.dtype == ember.int64
    x = ember.ones(2, 3, 4, 4, requires_grad=True)
    out = ember.nn.functional.adaptive_avg_pool2d(x, (0, 2))
    with pytest.raises(RuntimeError, match=r"adaptive_avg_pool2d_backward\(\): Expected "
                                           r"grad_output to have non-zero size .* sizes "
                                           r"\[2, 3, 0, 2\] with dimension 2 being empty"):
        out.sum().backward()


# --- 3. grad_fn._saved_self_sym_sizes ---------------------------------------------------------

@pytest.mark.parametrize("build,name,sizes", [
    (lambda x: x.view(24), "ViewBackward0", (6, 4)),
    (lambda x: x.t().reshape(24), "UnsafeViewBackward0", (4, 6)),
    (lambda x: x[::2].reshape(3, 2, 2), "ReshapeAliasBackward0", (3, 4)),
    (lambda x: x[:, :1].expand(6, 3), "ExpandBackward0", (6, 1)),
    (lambda x: x.sum(0), "SumBackward1", (6, 4)),
])
def test_saved_self_sym_sizes(build, name, sizes):
    x = ember.randn(6, 4, requires_grad=True)
    out = build(x)
    assert out.grad_fn.name() == name and out.grad_fn._saved_self_sym_sizes == sizes
    out.sum().backward()
    assert out.grad_fn._saved_self_sym_sizes == sizes          # ints outlive backward


def test_saved_self_sym_sizes_absent_where_not_saved():
    x = ember.randn(6, 4, requires_grad=True)
    with pytest.raises(AttributeError, match="'PermuteBackward0' object has no attribute "
                                             "'_saved_self_sym_sizes'"):
        x.permute(1, 0).grad_fn._saved_self_sym_sizes


# --- 4. scaled_dot_product_attention: a float attn_mask without grad has no edge ---------------

@pytest.mark.parametrize("shape", [(2, 3, 4, 8), (2, 4, 8)])
def test_sdpa_float_mask_without_grad_has_no_edge(shape):
    q = ember.randn(*shape, requires_grad=True)
    out = ember.nn.functional.scaled_dot_product_attention(q, q * 2, q * 3,
                                                            attn_mask=ember.randn(4, 4))
    seen = []
    out.grad_fn.register_hook(lambda gi, go: seen.append(len(gi)))
    assert len(out.grad_fn.next_functions) == 3
    out.sum().backward()
    assert seen == [3] and q.grad is not None


def test_sdpa_float_mask_with_grad_keeps_its_edge():
    q = ember.randn(2, 3, 4, 8, dtype=ember.float64, requires_grad=True)
    m = ember.randn(4, 4, dtype=ember.float64, requires_grad=True)
    out = ember.nn.functional.scaled_dot_product_attention(q, q * 2, q * 3, attn_mask=m)
    assert len(out.grad_fn.next_functions) == 4
    assert ember.autograd.gradcheck(
        lambda mask: ember.nn.functional.scaled_dot_product_attention(
            q.detach(), q.detach() * 2, q.detach() * 3, attn_mask=mask), (m,))
