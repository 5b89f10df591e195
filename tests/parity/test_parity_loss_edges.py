"""Loss edge cases against PyTorch: zero total class weight, weight shapes and dtypes,
target dtypes and shapes, and the errors for bad arguments (type and message)."""

import math

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

LOGITS = np.sin(np.arange(15.0).reshape(3, 5) * 0.37)


def _both(fn):
    """fn(lib) under each library: (value or exception, ...)."""
    out = []
    for lib in (torch, ember):
        try:
            out.append(fn(lib))
        except Exception as e:          # noqa: BLE001 - compared below
            out.append(e)
    return out


def _grad_of(lib, loss_fn):
    x = lib.tensor(LOGITS, dtype=lib.float32, requires_grad=True)
    loss = loss_fn(lib, x)
    loss.backward()
    return loss.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("target, smoothing", [
    ([1, 0, 4], 0.0), ([1, 0, 4], 0.2), ([1, -100, 4], 0.0), ([-100, -100, -100], 0.3)])
@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
def test_zero_total_weight(name, target, smoothing):
    kwargs = {"label_smoothing": smoothing} if name == "cross_entropy" else {}

    def loss_fn(lib, x):
        weight = lib.tensor([0.0, 0.0, 1.0, 1.0, 0.0])
        return getattr(lib.nn.functional, name)(x, lib.tensor(target), weight=weight, **kwargs)

    (tv, tg), (ev, eg) = _both(lambda lib: _grad_of(lib, loss_fn))
    np.testing.assert_allclose(ev, tv, rtol=1e-5, equal_nan=True)
    np.testing.assert_allclose(eg, tg, rtol=1e-5, atol=1e-7, equal_nan=True)
    assert (np.signbit(eg) == np.signbit(tg))[tg == 0].all()


def _errors(fn):
    t, e = _both(fn)
    assert isinstance(t, Exception) and type(e).__name__ == type(t).__name__, (t, e)
    assert str(e).replace("ember", "torch") == str(t), (str(t), str(e))


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.functional.binary_cross_entropy(
        lib.full((2, 4), 0.3), lib.ones(2, 4), weight=lib.ones(3)),
    lambda lib: lib.nn.functional.binary_cross_entropy(
        lib.full((2, 4), 0.3), lib.ones(2, 4), weight=lib.ones(3, 2, 4)),
    lambda lib: lib.nn.functional.multi_margin_loss(lib.zeros(3, 4), lib.tensor([1, 0, 1]).int()),
    lambda lib: lib.nn.functional.multilabel_margin_loss(lib.zeros(3, 4),
                                                         lib.zeros(3, 4, dtype=lib.uint8)),
    lambda lib: lib.nn.functional.cross_entropy(lib.zeros(3), lib.tensor([1, 2])),
    lambda lib: lib.nn.functional.nll_loss(lib.zeros(3), lib.tensor([1, 2])),
    lambda lib: lib.nn.functional.cross_entropy(lib.zeros(2, 3), lib.ones(2, 3) / 3,
                                                ignore_index=0),
    lambda lib: lib.nn.functional.cross_entropy(lib.zeros(2, 3), lib.ones(2, 3) / 3,
                                                weight=lib.ones(1, 3)),
    lambda lib: lib.nn.functional.kl_div(lib.tensor([1, 2]), lib.tensor([1.0, 2.0]),
                                         reduction="sum"),
    lambda lib: lib.nn.functional.ctc_loss(lib.zeros(5, 0, 4), lib.zeros(0, 2, dtype=lib.long),
                                           lib.zeros(0, dtype=lib.long),
                                           lib.zeros(0, dtype=lib.long)),
    lambda lib: lib.nn.functional.ctc_loss(lib.zeros(5, 2, 4), lib.ones(2, 1, dtype=lib.long),
                                           lib.tensor([5.0, 5.0]), lib.tensor([1, 1])),
    lambda lib: lib.broadcast_shapes(lib.Size([2, 4]), lib.Size([3])),
])
def test_errors_match(call):
    _errors(call)


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.functional.binary_cross_entropy(
        lib.full((2, 4), 0.3, dtype=lib.float16), lib.ones(2, 4, dtype=lib.float16),
        weight=lib.full((4,), 2.0)),
    lambda lib: lib.nn.functional.binary_cross_entropy(
        lib.full((2, 4), 0.3), lib.ones(2, 4), weight=lib.full((4,), 2.0, dtype=lib.float64)),
    lambda lib: lib.nn.functional.cross_entropy(
        lib.linspace(-1, 1, 6).reshape(2, 3), lib.tensor([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]),
        weight=lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64), label_smoothing=0.1),
    lambda lib: lib.nn.functional.margin_ranking_loss(
        lib.tensor([1, 2]), lib.tensor([2, 1]), lib.tensor([1, -1]), reduction="none"),
    lambda lib: lib.nn.functional.multi_margin_loss(
        lib.tensor([0.1, 0.5, -0.3, 2.0]), lib.tensor([2]), reduction="none"),
])
def test_values_dtypes_and_shapes_match(call):
    t, e = _both(call)
    assert str(e.dtype) == str(t.dtype).replace("torch", "ember")
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.float().numpy(), t.float().numpy(), rtol=2e-3)
    assert not math.isnan(float(e.float().sum()))
