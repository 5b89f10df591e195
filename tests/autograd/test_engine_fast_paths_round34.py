"""The backward engine's inlined common paths (round 34): gradient buffers, the conform test,
the derivative's ``needs`` mask, leaf hooks and dtypes, and backward()'s implicit root
gradient keep the results and errors of the general paths."""

import numpy as np
import pytest

import ember as torch


def test_broadcast_and_cast_gradients_are_conformed_to_their_inputs():
    a = torch.ones(3, 1, dtype=torch.float64, requires_grad=True)
    b = torch.full((4,), 2.0, dtype=torch.float32, requires_grad=True)
    (a * b).sum().backward()
    assert a.grad.dtype is torch.float64 and b.grad.dtype is torch.float32
    assert a.grad.shape == (3, 1) and b.grad.shape == (4,)
    np.testing.assert_array_equal(a.grad.numpy(), np.full((3, 1), 8.0))
    np.testing.assert_array_equal(b.grad.numpy(), np.full(4, 3.0))


def test_needs_mask_skips_the_input_that_needs_no_gradient():
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    c = torch.tensor([3.0, 5.0])
    gx, = torch.autograd.grad((a * c).sum(), a)
    np.testing.assert_array_equal(gx.numpy(), [3.0, 5.0])
    assert (a * c).grad_fn.next_functions[1] == (None, 0)


def test_gradients_of_a_shared_input_add_up_in_the_buffer():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3.0
    (y * y + y).sum().backward()                # y reached through three edges
    np.testing.assert_array_equal(x.grad.numpy(), [3 * (2 * 3.0 + 1), 3 * (2 * 6.0 + 1)])


def test_leaf_hooks_grad_dtype_and_post_accumulate_hooks_still_run():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    seen, after = [], []
    x.register_hook(lambda g: seen.append(g.clone()) or g * 10)
    x.register_post_accumulate_grad_hook(lambda t: after.append(t.grad.clone()))
    (x * 2.0).sum().backward()
    np.testing.assert_array_equal(seen[0].numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(after[0].numpy(), [20.0, 20.0])
    np.testing.assert_array_equal(x.grad.numpy(), [20.0, 20.0])
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    w.grad_dtype = torch.float64
    (w * 2.0).sum().backward()
    assert w.grad.dtype is torch.float64
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0])


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_implicit_root_gradient_is_a_one_of_the_loss_dtype(dtype):
    x = torch.tensor([1.5, -2.0], dtype=dtype, requires_grad=True)
    seen = []
    loss = (x * 4.0).sum()
    loss.register_hook(lambda g: seen.append(g))
    loss.backward()
    assert seen[0].dtype is dtype and seen[0].shape == ()
    assert float(seen[0]) == 1.0
    np.testing.assert_array_equal(x.grad.float().numpy(), [4.0, 4.0])


def test_backward_errors_are_kept():
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        (x * 2.0).backward()
    z = torch.ones(2, dtype=torch.complex64, requires_grad=True)
    with pytest.raises(RuntimeError, match="only for real scalar outputs but got "):
        (z * 2.0).sum().backward()
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        torch.ones(()).backward()
    y = (x * 2.0).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_a_saved_input_changed_in_place_is_refused():
    a = torch.ones(3, requires_grad=True)
    b = torch.ones(3) * 2
    out = (a * b).sum()
    b.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


# (review RC1) the fast paths against the general ones, on what they could get wrong


def _needs_seen(monkeypatch, op):
    seen, real = [], op.vjp

    def vjp(*args, **kwargs):
        seen.append((kwargs["needs"], "out" in kwargs))
        return real(*args, **kwargs)
    monkeypatch.setattr(op, "vjp", vjp)
    return seen


def test_the_needs_mask_names_the_inputs_that_want_a_gradient(monkeypatch):
    a = torch.tensor([1.0, -2.0], requires_grad=True)
    c = torch.tensor([3.0, 5.0])
    node = (a * c).grad_fn
    seen = _needs_seen(monkeypatch, node.op)
    (a * c).sum().backward()
    (c * a).sum().backward()
    (a * a).sum().backward()
    assert seen == [((True, False), False), ((False, True), False), ((True, True), False)]
    np.testing.assert_array_equal(a.grad.numpy(), [3.0 + 3.0 + 2.0, 5.0 + 5.0 - 4.0])
    three = _needs_seen(monkeypatch, torch.addcmul(a, c, a).grad_fn.op)
    gc, = torch.autograd.grad(torch.addcmul(c, c, a).sum(), a)
    assert three == [((False, False, True), False)]
    np.testing.assert_array_equal(gc.numpy(), [3.0, 5.0])
    saved_out = _needs_seen(monkeypatch, torch.copysign(a, c).grad_fn.op)  # (through _vjp)
    gs, = torch.autograd.grad(torch.copysign(a, -c).sum(), a)
    assert saved_out == [((True, False), True)]
    np.testing.assert_array_equal(gs.numpy(), [-1.0, 1.0])


class _Sub(torch.Tensor):
    pass


@pytest.mark.parametrize("make, expected", [
    (lambda x: (x * 3.0).sum().reshape(1, 1), [3.0, 3.0]),     # one element, not 0-dim
    (lambda x: (x * 3.0)[1:].sum(0, keepdim=True), [0.0, 3.0]),
    (lambda x: (x * 3.0)[1], [0.0, 3.0]),                      # a view of a non-leaf
    (lambda x: (x.double() * 3.0).sum(), [3.0, 3.0]),
    (lambda x: (x.to(torch.bfloat16) * 3.0).sum(), [3.0, 3.0]),  # (not a NumPy float kind)
    (lambda x: (x * 3.0).sum().as_subclass(_Sub), [3.0, 3.0]),
])
def test_implicit_root_gradient_of_one_element_losses(make, expected):
    x = torch.tensor([1.5, -2.0], requires_grad=True)
    loss, seen = make(x), []
    loss.register_hook(lambda g: seen.append(g))
    loss.backward()
    assert seen[0].dtype is loss.dtype and seen[0].shape == loss.shape
    assert float(seen[0].float().sum()) == 1.0
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_implicit_root_gradient_of_a_leaf_and_its_errors():
    w = torch.tensor(2.0, requires_grad=True)
    w.backward()                                        # no grad_fn: the general path
    assert float(w.grad) == 1.0
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        (torch.ones(0, requires_grad=True) * 2.0).backward()
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        torch.tensor([3]).sum().backward()
    x = torch.ones(1, requires_grad=True)
    with torch.no_grad():
        y = (x * 2.0).sum()
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        y.backward()
    z = torch.ones(1, dtype=torch.complex64, requires_grad=True)
    with pytest.raises(RuntimeError, match="real scalar outputs but got ember.complex64"):
        (z * 2.0).sum().conj().backward()


def test_leaf_hooks_read_when_the_leaf_runs():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([1.0, 3.0], requires_grad=True)
    a = x * 2.0
    b = a * 3.0
    log = []
    gone = x.register_hook(lambda g: g * 1000.0)
    gone_after = x.register_post_accumulate_grad_hook(lambda t: t.grad.mul_(5.0))
    gone.remove()
    gone_after.remove()

    def on_b(g):            # registered while backward runs, before x's accumulator does
        log.append("b")
        x.register_hook(lambda g3: log.append("x") or g3 + 1.0)
        x.register_post_accumulate_grad_hook(lambda t: log.append(t.grad.tolist()))
    b.register_hook(on_b)
    loss = (b * y).sum()
    y.requires_grad_(False)                 # frozen after the graph was built: no .grad
    loss.backward()
    assert log == ["b", "x", [7.0, 19.0]]
    np.testing.assert_array_equal(x.grad.numpy(), [7.0, 19.0])
    assert y.grad is None
