"""What the 3-D vision programs of round 27 (test_parity_programs_round27_3d.py and its _seg and
_flow siblings) found, each pinned against PyTorch: nll_loss and cross_entropy on volumetric
(N, C, D, H, W) and sequence (N, C, L) inputs check their class target as PyTorch's nll_nd
does (``Expected target size [N, d...], got [...]`` before the dtype), 4-d inputs as
nll_loss2d does (target dims, then dtype, then weight, then ``size mismatch``, then no Byte
target); class weights of such inputs are checked by count only (a (C, 1) weight is used as
(C,), with PyTorch's short message for a wrong count, and its errors under label smoothing);
and nll_loss names its node NllLoss2DBackward0 for any input of 3 or more dims (ViewBackward0
for an unreduced 3-d or 5-d+ one), as cross_entropy does."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_X = np.random.default_rng(2731).standard_normal((2, 3, 2, 2, 2)).astype(np.float32)
_T = np.random.default_rng(2732).integers(0, 3, (2, 2, 2, 2))


def _input(lib, ndim):
    """(N=2, C=3, 8 positions) logits with ``ndim`` dims, and a matching class target."""
    shape = (2, 3) + {3: (8,), 4: (4, 2), 5: (2, 2, 2)}[ndim]
    x = lib.from_numpy(_X.reshape(shape).copy()).requires_grad_()
    return x, lib.from_numpy(_T.reshape(shape[:1] + shape[2:]).copy())


def _error(f):
    try:
        f()
    except Exception as e:          # noqa: BLE001  (compared as PyTorch's)
        return type(e).__name__, str(e).split("\n")[0]
    return None


BAD_TARGETS = {
    "fewer_dims": lambda lib, x, t: lib.zeros(t.shape[:-1], dtype=lib.long),
    "more_dims": lambda lib, x, t: lib.zeros(tuple(t.shape) + (1,), dtype=lib.long),
    "wrong_size": lambda lib, x, t: lib.zeros(tuple(t.shape[:-1]) + (5,), dtype=lib.long),
    "float_wrong_size": lambda lib, x, t: lib.zeros(tuple(t.shape[:-1]) + (5,)),
    "float": lambda lib, x, t: t.float(),
    "int32": lambda lib, x, t: t.int(),
    "uint8": lambda lib, x, t: t.to(lib.uint8),     # nll_loss2d takes Long only
    "uint8_wrong_size": lambda lib, x, t: lib.zeros(tuple(t.shape[:-1]) + (5,),
                                                    dtype=lib.uint8),
}


@pytest.mark.parametrize("ndim", [3, 4, 5])
@pytest.mark.parametrize("bad", sorted(BAD_TARGETS))
@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy", "cross_entropy_smoothed"])
def test_class_target_errors_like_torch(ndim, bad, loss):
    def error(lib):
        x, t = _input(lib, ndim)
        fn = getattr(lib.nn.functional, loss.replace("_smoothed", ""))
        kw = {"label_smoothing": 0.1} if loss.endswith("smoothed") else {}
        return _error(lambda: fn(x, BAD_TARGETS[bad](lib, x, t), **kw))
    expected = error(torch)
    assert expected is not None
    assert error(ember) == expected


@pytest.mark.parametrize("ndim", [3, 4, 5])
@pytest.mark.parametrize("bad", ["wrong_size", "uint8", "uint8_wrong_size", "int32"])
@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy_smoothed"])
def test_target_and_weight_check_order_like_torch(ndim, bad, loss):
    """A bad target with a weight of the wrong count or shape: which error comes first."""
    def errors(lib):
        x, t = _input(lib, ndim)
        fn = getattr(lib.nn.functional, loss.replace("_smoothed", ""))
        kw = {"label_smoothing": 0.1} if loss.endswith("smoothed") else {}
        return [_error(lambda: fn(x, BAD_TARGETS[bad](lib, x, t), weight=w, **kw))
                for w in (lib.ones(4), lib.ones(3, 1), lib.ones(1, 3))]
    assert errors(ember) == errors(torch)


@pytest.mark.parametrize("ndim", [2, 3, 4, 5])
@pytest.mark.parametrize("shape", [(4,), (3, 1), (1, 3), (3, 1, 1), (2,)])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_class_weight_shapes_like_torch(ndim, shape, smoothing, reduction):
    """A (C, 1) weight counts as (C,) for inputs of 3+ dims; wrong counts and smoothing with
    a weight of several dims raise PyTorch's errors (a (C, 1) one only for the mean)."""
    w = np.array([0.5, 1.0, 2.0, 3.0], np.float32)[:int(np.prod(shape))].reshape(shape)

    def run(lib):
        x, t = _input(lib, ndim) if ndim > 2 else (
            lib.from_numpy(_X[:, :, 0, 0, 0].copy()).requires_grad_(),
            lib.from_numpy(_T[:, 0, 0, 0].copy()))
        out = {}
        for name in ("nll_loss", "cross_entropy"):
            kw = {"label_smoothing": smoothing} if name == "cross_entropy" else {}
            kw["reduction"] = reduction
            fn = getattr(lib.nn.functional, name)
            err = _error(lambda: fn(x, t, weight=lib.from_numpy(w), **kw))
            if err is not None:
                out[name] = err
                continue
            loss = fn(x, t, weight=lib.from_numpy(w), **kw)
            grad, = lib.autograd.grad(loss.sum(), x)
            out[name] = (loss.detach().numpy(), grad.numpy(), loss.grad_fn.name())
        return out

    ours, theirs = run(ember), run(torch)
    assert ours.keys() == theirs.keys()
    for name, expected in theirs.items():
        if isinstance(expected[0], str):
            assert ours[name] == expected, name
        else:
            np.testing.assert_allclose(ours[name][0], expected[0], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(ours[name][1], expected[1], rtol=1e-4, atol=2e-5)
            assert ours[name][2] == expected[2], name


@pytest.mark.parametrize("ndim", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy"])
def test_loss_node_name_like_torch(ndim, reduction, loss):
    """3-d and 5-d+ inputs reshaped to 4-d for nll_loss2d come back through a view unreduced."""
    def name(lib):
        if ndim == 1:
            x, t = lib.zeros(3, requires_grad=True), lib.tensor(1)
        elif ndim == 2:
            x, t = lib.zeros(2, 3, requires_grad=True), lib.tensor([0, 2])
        else:
            x, t = _input(lib, ndim)
        return getattr(lib.nn.functional, loss)(x, t, reduction=reduction).grad_fn.name()
    assert name(ember) == name(torch)


def test_weighted_volumetric_cross_entropy_like_torch():
    """nnU-Net-style weighted CE on a (N, C, D, H, W) input, value and gradient."""
    def run(lib):
        x, t = _input(lib, 5)
        loss = lib.nn.CrossEntropyLoss(weight=lib.tensor([0.2, 1.0, 3.0]))(x, t)
        return loss.item(), lib.autograd.grad(loss, x)[0].numpy()
    ours, theirs = run(ember), run(torch)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5, atol=1e-7)
