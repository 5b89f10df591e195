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
