"""The normalization, affine, embedding and distance layers against PyTorch's: weights
copied into torch's module, outputs, input and parameter gradients and buffers compared."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from tests.parity._compare import assert_close

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _t(x, grad=False):
    t = torch.tensor(x.detach().numpy() if isinstance(x, ember.Tensor) else x)
    return t.requires_grad_(grad)


def _copy_state(ours, theirs):
    with torch.no_grad():
        for name, p in list(ours.named_parameters()) + list(ours.named_buffers()):
            getattr(theirs, name.split(".")[-1]).copy_(_t(p))


def _close(a, b, tol=1e-5):
    """Assert ember's ``a`` matches torch's ``b`` in shape and values."""
    assert_close(a, b, tol, tol)


def _compare(ours, theirs, *inputs, steps=2):
    """Train-mode steps (forward, backward), then one eval step, comparing everything."""
    _copy_state(ours, theirs)
    for training in [True] * steps + [False]:
        ours.train(training)
        theirs.train(training)
        xs = [ember.tensor(x, requires_grad=x.dtype.kind == "f") for x in inputs]
        ts = [_t(x, x.dtype.kind == "f") for x in inputs]
        y, ty = ours(*xs), theirs(*ts)
        _close(y, ty)
        g = np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(np.float32)
        y.backward(ember.tensor(g))
        ty.backward(_t(g))
        for x, tx in zip(xs, ts):
            if x.requires_grad:
                _close(x.grad, tx.grad, 1e-4)
        for (name, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
            if p.grad is not None or tp.grad is not None:
                _close(p.grad, tp.grad, 1e-4)
        for (name, b), (_, tb) in zip(ours.named_buffers(), theirs.named_buffers()):
            np.testing.assert_allclose(b.numpy(), tb.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=name)


def _x(*shape, scale=3.0, shift=1.0):
    return (np.random.default_rng(0).standard_normal(shape) * scale + shift).astype(np.float32)


@pytest.mark.parametrize("name,args,kwargs,shape", [
    ("BatchNorm1d", (3,), {}, (4, 3)),
    ("BatchNorm1d", (3,), {"momentum": None}, (4, 3, 5)),
    ("BatchNorm2d", (3,), {"affine": False}, (2, 3, 4, 4)),
    ("BatchNorm2d", (3,), {"track_running_stats": False}, (2, 3, 2, 2)),
    ("BatchNorm3d", (2,), {}, (2, 2, 2, 2, 3)),
    ("InstanceNorm1d", (3,), {"affine": True, "track_running_stats": True}, (2, 3, 5)),
    ("InstanceNorm2d", (3,), {}, (3, 4, 4)),
    ("LayerNorm", ((3, 4),), {}, (2, 3, 4)),
    ("LayerNorm", (4,), {"bias": False, "eps": 1e-3}, (5, 4)),
    ("GroupNorm", (2, 4), {}, (2, 4, 3)),
    ("RMSNorm", (4,), {}, (3, 4)),
    ("RMSNorm", ((2, 4),), {"eps": 1e-3}, (3, 2, 4)),
    ("LocalResponseNorm", (3,), {"alpha": 0.1}, (2, 5, 3)),
    ("Linear", (4, 3), {}, (2, 5, 4)),
    ("Flatten", (), {}, (2, 3, 4)),
])
def test_layer_parity(name, args, kwargs, shape):
    ours = getattr(ember.nn, name)(*args, **kwargs)
    theirs = getattr(torch.nn, name)(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    _compare(ours, theirs, _x(*shape))


def test_bilinear_parity():
    ours, theirs = ember.nn.Bilinear(3, 2, 4), torch.nn.Bilinear(3, 2, 4)
    _compare(ours, theirs, _x(5, 3), _x(5, 2))


@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 1}, {"scale_grad_by_freq": True},
                                    {"max_norm": 1.5}])
def test_embedding_parity(kwargs):
    ours, theirs = ember.nn.Embedding(6, 3, **kwargs), torch.nn.Embedding(6, 3, **kwargs)
    assert repr(ours) == repr(theirs)
    _copy_state(ours, theirs)
    idx = np.array([[1, 2, 1], [5, 1, 0]])
    y, ty = ours(ember.tensor(idx)), theirs(torch.tensor(idx))
    _close(y, ty)
    y.sum().backward()
    ty.sum().backward()
    _close(ours.weight.grad, theirs.weight.grad)
    _close(ours.weight, theirs.weight)                   # max_norm renormalizes in place


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_parity(mode, padding_idx):
    ours = ember.nn.EmbeddingBag(6, 3, mode=mode, padding_idx=padding_idx)
    theirs = torch.nn.EmbeddingBag(6, 3, mode=mode, padding_idx=padding_idx)
    _copy_state(ours, theirs)
    idx, offsets = np.array([1, 2, 3, 5, 2, 0, 4]), np.array([0, 0, 2, 5])
    y = ours(ember.tensor(idx), ember.tensor(offsets))
    ty = theirs(torch.tensor(idx), torch.tensor(offsets))
    _close(y, ty)
    g = _x(4, 3)
    y.backward(ember.tensor(g))
    ty.backward(_t(g))
    _close(ours.weight.grad, theirs.weight.grad)


def test_functional_parity():
    a, b = _x(3, 4), _x(3, 4, shift=0.0)
    for fn, kwargs in ((F.normalize, {"p": 3, "dim": 0}), (F.cosine_similarity, {"dim": 1}),
                       (F.pairwise_distance, {"p": 1.5, "keepdim": True})):
        tfn = getattr(torch.nn.functional, fn.__name__)
        args = (a,) if fn is F.normalize else (a, b)
        xs = [ember.tensor(x, requires_grad=True) for x in args]
        ts = [_t(x, True) for x in args]
        y, ty = fn(*xs, **kwargs), tfn(*ts, **kwargs)
        _close(y, ty)
        y.sum().backward()
        ty.sum().backward()
        for x, t in zip(xs, ts):
            _close(x.grad, t.grad, 1e-4)
    idx = np.array([[0, 3], [2, 2]])
    assert F.one_hot(ember.tensor(idx), 5).tolist() == \
        torch.nn.functional.one_hot(torch.tensor(idx), 5).tolist()


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("channels", [1, 3, 7])
def test_cross_map_lrn2d_values(size, channels):
    x = np.random.default_rng(size).random((2, channels, 3, 2)).astype(np.float32)
    ours = ember.nn.CrossMapLRN2d(size, alpha=0.5, beta=0.75, k=2)(ember.tensor(x))
    theirs = torch.nn.CrossMapLRN2d(size, alpha=0.5, beta=0.75, k=2)(_t(x))
    _close(ours, theirs)
