"""Small fidelity items against PyTorch 2.13: writes through uint8 masks (autograd and vmap),
adaptive average pooling of empty planes to ones (a mean: NaN), ``_saved_self_sym_sizes``,
and the edges of scaled_dot_product_attention's CPU flash node with a float attn_mask.
"""

import math

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_close, recorded

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_UINT8 = "indexing with dtype torch.uint8 is now deprecated"


def _warnings(caught):
    """The recorded warnings, PyTorch's "(Triggered internally at ...)" suffix dropped."""
    return [(kind, text.split(" (Triggered internally")[0]) for kind, text in caught]


def _as_lists(value):
    if isinstance(value, tuple) and value and isinstance(value[0], str):
        return value                                # an (error type, message) pair
    if isinstance(value, tuple):
        return tuple(_as_lists(v) for v in value)
    return value.detach().tolist()


def _same(fn):
    """Assert ``fn(ember)`` and ``fn(torch)`` give one outcome and the same warnings."""
    ours, theirs = recorded(fn, ember), recorded(fn, torch)
    assert _as_lists(ours[0]) == _as_lists(theirs[0])
    assert _warnings(ours[1]) == _warnings(theirs[1])
    return ours


# --- 1. uint8 masks ---------------------------------------------------------------------------

def _mask(lib):
    return lib.tensor([1, 0, 1], dtype=lib.uint8)


def _set_values(lib):
    y = lib.arange(3.0)
    y[_mask(lib)] = lib.tensor([8.0, 9.0])
    return y


def _set_scalar(lib):
    y = lib.arange(3.0)
    y[_mask(lib)] = 0                   # PyTorch's masked_fill_ shortcut refuses uint8 masks
    return y


def _index_put_accumulate(lib):
    return lib.arange(3.0).index_put((_mask(lib),), lib.tensor(5.0), accumulate=True)


def _mixed_scalar(lib):
    z = lib.zeros(2, 3)
    z[lib.tensor([1, 0], dtype=lib.uint8), lib.tensor([2])] = 1.0
    return z


@pytest.mark.parametrize("fn", [
    lambda lib: lib.arange(3.0)[_mask(lib)],
    lambda lib: lib.arange(6.0).reshape(2, 3)[:, _mask(lib)],
    _set_values, _set_scalar, _index_put_accumulate, _mixed_scalar,
], ids=["get", "get_2d", "set_values", "set_scalar", "index_put_acc", "mixed_scalar"])
def test_uint8_mask_forward(fn):
    outcome, caught = _same(fn)
    assert caught or outcome[0] == "RuntimeError"


def _grad_through_write(lib):
    x = lib.arange(3.0, requires_grad=True)
    v = lib.tensor([2.0, 3.0], requires_grad=True)
    y = x.clone()
    y[_mask(lib)] = v
    (y * lib.tensor([1.0, 10.0, 100.0])).sum().backward()
    return x.grad, v.grad


def test_uint8_mask_write_backward():
    grads, caught = _same(_grad_through_write)
    assert len(caught) == 3
    assert grads[0].tolist() == [0.0, 10.0, 0.0] and grads[1].tolist() == [1.0, 100.0]


def _vmap_set_scalar(lib):
    def write(row):
        row = row.clone()
        row[_mask(lib)] = 0.0           # under vmap the mask is never alone: no masked_fill_
        return row
    return lib.func.vmap(write)(lib.arange(6.0).reshape(2, 3))


def _vmap_index_put(lib):
    def put(row):
        return row.index_put((_mask(lib),), lib.tensor(1.0), accumulate=True)
    return lib.func.vmap(put)(lib.arange(6.0).reshape(2, 3))


def _vmap_bool_mask_dtype(lib):
    mask = lib.tensor([True, False, True])
    return lib.func.vmap(lambda r: r.index_put((mask,), lib.tensor(5)))(lib.ones(2, 3))


@pytest.mark.parametrize("fn", [_vmap_set_scalar, _vmap_index_put, _vmap_bool_mask_dtype])
def test_uint8_mask_under_vmap(fn):
    ours, theirs = recorded(fn, ember), recorded(fn, torch)
    assert _as_lists(ours[0]) == _as_lists(theirs[0])
    # PyTorch may warn once per batching step; the warnings must be its own
    assert {w for w in _warnings(ours[1])} == {w for w in _warnings(theirs[1])}
    assert not any("performance drop" in text for _, text in ours[1])


# --- 2. adaptive average pooling of empty planes ----------------------------------------------

_EMPTY_POOLS = [
    (1, (2, 3, 0), 1), (1, (3, 0), 1), (1, (0, 3, 0), 1), (1, (2, 3, 0), 3), (1, (2, 3, 0), 0),
    (1, (2, 3, 4), 0), (2, (2, 3, 4, 0), 1), (2, (3, 0, 0), (1, 1)), (2, (2, 3, 0, 4), (1, 2)),
    (2, (3, 1, 0), (None, 1)), (2, (3, 4, 0), (2, None)), (2, (3, 0, 4), 2),
    (3, (2, 3, 0, 4, 4), 1), (3, (3, 4, 4, 0), 2), (3, (2, 3, 0, 0, 0), (1, 2, 3)),
]


@pytest.mark.parametrize("nd,shape,size", _EMPTY_POOLS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "bfloat16", "int64"])
def test_adaptive_avg_pool_of_empty_planes(nd, shape, size, dtype):
    def run(lib):
        x = lib.ones(shape, dtype=getattr(lib, dtype))
        out = getattr(lib.nn.functional, f"adaptive_avg_pool{nd}d")(x, size)
        return tuple(out.shape), out.stride(), str(out.dtype).split(".")[1], [
            math.isnan(v.real) and (not isinstance(v, complex) or math.isnan(v.imag))
            for v in out.float().flatten().tolist()] if dtype != "complex64" else [
            repr(v) for v in out.flatten().tolist()]
    ours, theirs = recorded(run, ember), recorded(run, torch)
    assert ours[0] == theirs[0]
    assert ours[1] == theirs[1] == []


@pytest.mark.parametrize("nd,shape", [(1, (2, 3, 0)), (2, (2, 3, 4, 0)), (3, (2, 3, 0, 1, 1))])
@pytest.mark.parametrize("channels_last", [False, True])
def test_adaptive_avg_pool_of_empty_planes_backward(nd, shape, channels_last):
    def run(lib):
        x = lib.ones(shape)
        if channels_last and nd > 1:
            x = x.contiguous(memory_format=lib.channels_last if nd == 2
                             else lib.channels_last_3d)
        x.requires_grad_()
        out = getattr(lib.nn.functional, f"adaptive_avg_pool{nd}d")(x, 1)
        out.sum().backward()
        return out, out.stride(), out.grad_fn.name(), x.grad
    (ours, w_ours), (theirs, w_theirs) = recorded(run, ember), recorded(run, torch)
    assert w_ours == w_theirs == []
    assert_close(ours[0], theirs[0])
    assert ours[1:3] == theirs[1:3]
    assert tuple(ours[3].shape) == tuple(theirs[3].shape)


@pytest.mark.parametrize("nd,shape,size", [
    (1, (2, 3, 4), 0), (1, (3, 4), 0), (1, (0, 3, 4), 2), (2, (2, 3, 4, 4), (0, 2)),
    (2, (3, 4, 4), (2, 0)), (2, (0, 3, 4, 4), 2), (3, (2, 3, 2, 2, 2), 0),
    (3, (3, 2, 2, 2), (1, 0, 1)), (3, (0, 3, 2, 2, 2), 2),
])
def test_adaptive_avg_pool_to_empty_backward(nd, shape, size):
    def run(lib):
        x = lib.ones(shape, requires_grad=True)
        out = getattr(lib.nn.functional, f"adaptive_avg_pool{nd}d")(x, size)
        out.sum().backward()
        return out.grad_fn.name(), tuple(x.grad.shape), x.grad.stride()
    ours, theirs = recorded(run, ember), recorded(run, torch)
    assert ours == theirs


@pytest.mark.parametrize("dtype", ["int64", "complex64", "bool", "float16"])
@pytest.mark.parametrize("nd,shape,size", [
    (1, (2, 3, 4), 0), (1, (0, 3, 4), 2), (2, (2, 3, 4, 4), (0, 2)), (2, (2, 0, 4, 4), 2),
    (2, (2, 3, 4, 4), 2), (3, (2, 3, 2, 2, 2), 0), (3, (0, 3, 2, 2, 2), 2),
])
def test_adaptive_avg_pool_to_empty_dtypes(dtype, nd, shape, size):
    def run(lib):
        x = lib.ones(shape, dtype=getattr(lib, dtype))
        out = getattr(lib.nn.functional, f"adaptive_avg_pool{nd}d")(x, size)
        return tuple(out.shape), str(out.dtype).split(".")[1], out.stride()
    assert recorded(run, ember) == recorded(run, torch)


# --- 3. grad_fn._saved_self_sym_sizes ---------------------------------------------------------

_SIZED = {
    "view": lambda lib, x: x.view(24), "view_as": lambda lib, x: x.view_as(lib.zeros(24)),
    "reshape_view": lambda lib, x: x.reshape(24), "reshape_copy": lambda lib, x: x.t().reshape(24),
    "reshape_alias": lambda lib, x: x[::2].reshape(3, 2, 2),
    "flatten": lambda lib, x: x.flatten(), "flatten_copy": lambda lib, x: x.t().flatten(),
    "flatten_alias": lambda lib, x: x[::2].flatten(),
    "unflatten": lambda lib, x: x.unflatten(0, (2, 3)),
    "ravel_copy": lambda lib, x: x.t().ravel(), "expand": lambda lib, x: x[:, :1].expand(6, 3),
    "squeeze": lambda lib, x: x[:1].squeeze(), "squeeze_dim": lambda lib, x: x[:1].squeeze(0),
    "squeeze_dims": lambda lib, x: x[:1].squeeze((0, 1)), "select": lambda lib, x: x[0],
    "select_fn": lambda lib, x: x.select(1, 2), "slice": lambda lib, x: x[:, 1:3],
    "narrow": lambda lib, x: x.narrow(0, 1, 2), "unfold": lambda lib, x: x.unfold(0, 2, 1),
    "diagonal": lambda lib, x: x.diagonal(), "split": lambda lib, x: x.split(2)[0],
    "chunk": lambda lib, x: x.chunk(2)[1], "split_sizes": lambda lib, x: x.split([1, 5])[1],
    "sum": lambda lib, x: x.sum(), "sum_dim": lambda lib, x: x.sum(0),
    "mean_dim": lambda lib, x: x.mean(0),
    "index_select": lambda lib, x: x.index_select(0, lib.tensor([1, 2])),
    "permute": lambda lib, x: x.permute(1, 0), "t": lambda lib, x: x.t(),
    "unsqueeze": lambda lib, x: x.unsqueeze(0), "cdist": lambda lib, x: lib.cdist(x, x),
}


def _sizes(node):
    try:
        return node._saved_self_sym_sizes
    except AttributeError as e:
        return "AttributeError", str(e)


@pytest.mark.parametrize("name", sorted(_SIZED))
def test_saved_self_sym_sizes(name):
    def run(lib):
        x = lib.randn(6, 4, requires_grad=True)
        node = _SIZED[name](lib, x).grad_fn
        return node.name(), _sizes(node)
    ours, theirs = run(ember), run(torch)
    assert ours == theirs


@pytest.mark.parametrize("name", ["view", "reshape_copy", "reshape_alias", "expand"])
def test_saved_self_sym_sizes_outlive_backward(name):
    def run(lib):
        x = lib.randn(6, 4, requires_grad=True)
        out = _SIZED[name](lib, x)
        out.sum().backward()
        return _sizes(out.grad_fn)
    assert run(ember) == run(torch)


# --- 4. scaled_dot_product_attention: a float attn_mask without grad has no edge ---------------

@pytest.mark.parametrize("mask_grad", [False, True])
def test_sdpa_float_mask_edges(mask_grad):
    rng = np.random.default_rng(0)
    q_np, m_np = rng.standard_normal((2, 3, 4, 8)), rng.standard_normal((4, 4))

    def run(lib):
        q = lib.tensor(q_np, dtype=lib.float32, requires_grad=True)
        m = lib.tensor(m_np, dtype=lib.float32, requires_grad=mask_grad)
        out = lib.nn.functional.scaled_dot_product_attention(q, q * 2, q * 3, attn_mask=m)
        seen = []
        out.grad_fn.register_hook(lambda gi, go: seen.append(
            [None if g is None else tuple(g.shape) for g in gi]))
        node = out.grad_fn
        (out * lib.arange(8.0)).sum().backward()
        return node.name(), len(node.next_functions), seen, q.grad, m.grad

    ours, theirs = run(ember), run(torch)
    if not mask_grad:       # PyTorch's CPU flash kernel: q, k, v alone
        assert theirs[0] == "ScaledDotProductFlashAttentionForCpuBackward0"
        assert ours[:3] == theirs[:3]
        assert ours[4] is None and theirs[4] is None
    else:                   # (PyTorch's math kernel: a graph of many nodes)
        assert_close(ours[4], theirs[4], rtol=1e-4, atol=1e-5)
    assert_close(ours[3], theirs[3], rtol=1e-4, atol=1e-5)
