"""Review of the view-history rebuild on a version change (ops/_inplace.refresh_view_history),
against PyTorch: a view a custom Function returned refuses to be used once its base changed in
place (under no_grad too), and hooks and retained grads of a rebuilt view behave as PyTorch's."""

import numpy as np
import pytest

import ember
from tests.parity._compare import outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _view_function(lib):
    class Flatten(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a.view(-1)

        @staticmethod
        def backward(ctx, grad):
            return grad.view(2, 3) * 2

    return Flatten


def _function_view_after_write(lib, leaf, grad_mode):
    w = lib.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    base = w if leaf else w * 1
    out = _view_function(lib).apply(base)
    with lib.set_grad_enabled(grad_mode and not leaf):
        base.add_(1.0)

    def use():
        (out * 3).sum().backward()
        return w.grad.tolist()
    return outcome(lambda: type(out.grad_fn).__name__), outcome(use)


@pytest.mark.parametrize("leaf,grad_mode", [(False, True), (False, False), (True, False)])
def test_view_returned_by_a_custom_function_refuses_a_changed_base(leaf, grad_mode):
    ours = _function_view_after_write(ember, leaf, grad_mode)
    assert ours == _function_view_after_write(torch, leaf, grad_mode)
    assert ours[0][1].startswith("Output 0 of Flatten is a view and its base or another view")


def test_view_returned_by_a_custom_function_keeps_its_backward_without_a_write():
    def run(lib):
        w = lib.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
        out = _view_function(lib).apply(w * 1)
        (out * 3).sum().backward()
        return type(out.grad_fn).__name__, w.grad.tolist()
    assert run(ember) == run(torch) == ("FlattenBackward", [[6.0] * 3] * 2)


def _hooked_view_after_write(lib, leaf):
    w = lib.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    base = w if leaf else w * 1
    v = base.t()
    seen = []
    v.register_hook(lambda g: seen.append(g.tolist()) or g * 2)     # on the node of before
    v.retain_grad()                                                 # moves to the rebuilt one
    y = (v * 2).sum()
    with lib.no_grad():
        base.add_(1.0)
    (y + (v * 3).sum()).backward()
    return seen, v.grad.tolist(), w.grad.tolist(), type(v.grad_fn).__name__


@pytest.mark.parametrize("leaf", [True, False])
def test_hooks_and_retained_grad_of_a_view_rebuilt_after_a_no_grad_write(leaf):
    assert _hooked_view_after_write(ember, leaf) == _hooked_view_after_write(torch, leaf)


def _no_grad_view_after_write(lib, kind):
    """A view made without grad mode of a tensor that requires grad, used after its memory
    was written in place (an optimizer's step on the parameter it views)."""
    p = lib.nn.Parameter(lib.tensor(np.arange(6.0).reshape(2, 3)))
    with lib.inference_mode() if kind == "inference_mode" else lib.no_grad():
        v = p.view(-1)
    if kind == "view_of_view":
        v = v[1:]                               # made with grad mode on, of that view
    if kind == "written_through_view":
        with lib.no_grad():
            v.mul_(2.0)
    elif kind != "no_write":
        (p * 2).sum().backward()
        lib.optim.SGD([p], lr=0.1).step()
    return outcome(lambda: v.grad_fn is None), outcome(lambda: (v * 2).sum().item())


@pytest.mark.parametrize("kind", ["step", "view_of_view", "written_through_view",
                                  "inference_mode", "no_write"])
def test_view_made_without_grad_mode_refuses_a_changed_base(kind):
    ours = _no_grad_view_after_write(ember, kind)
    assert ours == _no_grad_view_after_write(torch, kind)
    assert ours[0] is True if kind == "no_write" else ours[0][0] == "RuntimeError"


def _saved_no_grad_view_after_write(lib, write):
    w = lib.ones(2, 3, requires_grad=True)
    x = lib.ones(3, 2, requires_grad=True)
    with lib.no_grad():
        v = w.t()
    y = (v * x).sum()                           # mul saves v for x's gradient
    if write:
        with lib.no_grad():
            w.add_(1.0)

    def run():
        y.backward()
        return x.grad.tolist(), w.grad
    return outcome(run)


@pytest.mark.parametrize("write", [False, True])
def test_saved_no_grad_view_reports_its_changed_base(write):
    assert _saved_no_grad_view_after_write(ember, write) \
        == _saved_no_grad_view_after_write(torch, write)
