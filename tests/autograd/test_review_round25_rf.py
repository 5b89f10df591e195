"""Review of the view-history rebuild on a version change: views whose history PyTorch refuses
to rebuild (made without grad mode, or returned by a custom Function) raise its errors once
their base was written in place, in any grad mode; messages as PyTorch 2.13 words them."""

import pytest

import ember

_REBASED = "its base or another view of its base has been modified inplace"


def _step(p):
    (p * 2).sum().backward()
    ember.optim.SGD([p], lr=0.1).step()


def test_view_made_under_no_grad_refuses_use_after_an_optimizer_step():
    p = ember.nn.Parameter(ember.ones(2, 3))
    with ember.no_grad():
        flat = p.view(-1)
    assert flat.grad_fn is None and flat.requires_grad     # usable before the step
    _step(p)
    with pytest.raises(RuntimeError, match=f"^A view was created in no_grad mode and {_REBASED} "
                       "with grad mode enabled. Given that this use case is ambiguous"):
        flat * 2
    with pytest.raises(RuntimeError, match="^A view was created in no_grad mode"):
        flat.grad_fn


def test_view_of_a_no_grad_view_names_itself():
    p = ember.nn.Parameter(ember.ones(2, 3))
    with ember.no_grad():
        flat = p.view(-1)
    tail = flat[1:]
    assert type(tail.grad_fn).__name__ == "SliceBackward0"
    _step(p)
    with pytest.raises(RuntimeError, match="^Output 0 of Slice is a view of a view which was "
                       f"created in no_grad mode and {_REBASED} with grad mode enabled"):
        tail.grad_fn


def test_no_grad_view_of_a_tensor_without_grad_is_never_refused():
    w = ember.ones(2, 3)
    with ember.no_grad():
        v = w.t()
    w.add_(1.0)
    assert v.grad_fn is None and v._version == 1
    assert (v * 2).sum().item() == 24.0


class _Flatten(ember.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a.view(-1)

    @staticmethod
    def backward(ctx, grad):
        return grad.view(2, 3) * 2


@pytest.mark.parametrize("grad_mode", [True, False])
def test_view_returned_by_a_custom_function_refuses_a_changed_base(grad_mode):
    w = ember.ones(2, 3, requires_grad=True)
    base = w * 1
    out = _Flatten.apply(base)
    assert type(out.grad_fn).__name__ == "_FlattenBackward"
    with ember.set_grad_enabled(grad_mode):
        base.add_(1.0)
    with pytest.raises(RuntimeError, match=f"^Output 0 of _Flatten is a view and {_REBASED}. "
                       "This view was created inside a custom Function"):
        (out * 3).sum()
