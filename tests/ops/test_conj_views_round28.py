"""Round 28: ``conj()`` of a complex tensor is a lazy view with the conjugate bit (NOTE
[Conjugate views] in ember/_conj_view.py), checked against NumPy."""

import copy
import weakref

import numpy as np
import pytest

import ember

_X = np.array([[1 + 2j, 3 - 4j, -5 + 0.5j], [0.25 - 1j, 2j, -3 + 0j]], dtype=np.complex64)


def _x():
    return ember.tensor(_X.copy())


def test_conj_is_a_view_with_the_bit():
    x = _x()
    y = x.conj()
    assert y.is_conj() and ember.is_conj(y) and not x.is_conj()
    assert y._is_view() and y._base is x and y.data_ptr() == x.data_ptr()
    assert y.stride() == x.stride() and y.shape == x.shape and y.dtype == x.dtype
    np.testing.assert_array_equal(y.resolve_conj().numpy(), _X.conj())
    assert y.tolist() == _X.conj().tolist()
    assert repr(y).startswith("tensor([[ 1.0000-2.0000j")


def test_real_tensor_conj_is_itself():
    r = ember.tensor([1.0, 2.0])
    assert r.conj() is r and not r.conj().is_conj()


def test_views_of_a_conj_view_keep_the_bit_and_the_memory():
    x = _x()
    for v, ref in [(x.conj()[1], _X.conj()[1]), (x.conj().t(), _X.conj().T),
                   (x.mH, _X.conj().T), (x.conj()[:, 1:], _X.conj()[:, 1:]),
                   (x.conj().unsqueeze(0), _X.conj()[None])]:
        assert v.is_conj()
        np.testing.assert_array_equal(v.resolve_conj().numpy(), ref)
    back = x.conj().conj()
    assert not back.is_conj() and back.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(back.numpy(), _X)


def test_writes_go_both_ways():
    x = _x()
    y = x.conj()
    y[0, 0] = 1 + 1j
    assert x[0, 0].item() == 1 - 1j
    y[1].mul_(2)
    np.testing.assert_array_equal(x[1].numpy(), _X[1] * 2)
    y.t()[2].zero_()
    assert x[:, 2].abs().sum().item() == 0
    x[0, 1] = 7 + 7j
    assert y[0, 1].item() == 7 - 7j
    ember.add(ember.ones(2, 3, dtype=ember.complex64), 1j, out=y)
    np.testing.assert_array_equal(x.numpy(), np.full((2, 3), 1 - 1j, np.complex64))


def test_ops_read_conjugated_values():
    x = _x()
    y = x.conj()
    for got, want in [(y + 1, _X.conj() + 1), (y * x, _X.conj() * _X), (y.sum(), _X.conj().sum()),
                      (x @ x.mH, _X @ _X.conj().T), (y.clone(), _X.conj()),
                      (y.conj_physical(), _X), (y.real, _X.real), (y.imag, -_X.imag)]:
        assert not got.is_conj()
        np.testing.assert_allclose(got.resolve_neg().numpy(), want, rtol=1e-6)
    z = y.resolve_conj()
    z.zero_()                                   # a copy: x is untouched
    np.testing.assert_array_equal(x.numpy(), _X)


def test_errors():
    y = _x().conj()
    with pytest.raises(RuntimeError, match=r"^Can't call numpy\(\) on Tensor that has conjugate "
                                           r"bit set. Use tensor.resolve_conj\(\).numpy\(\)"):
        y.numpy()
    with pytest.raises(RuntimeError, match="^view_as_real doesn't work on unresolved conjugated"):
        ember.view_as_real(y)


def test_autograd_through_conj():
    a = ember.tensor(_X.astype(np.complex128), requires_grad=True)
    b = a.conj()
    assert type(b.grad_fn).__name__ == "ConjBackward0"
    w = np.arange(6).reshape(2, 3) + 1j
    (b * ember.tensor(w)).sum().real.backward()
    # d Re(sum(conj(a) w)) / d a, as PyTorch's conjugate Wirtinger convention gives it: w
    np.testing.assert_allclose(a.grad.resolve_conj().numpy(), w)


def test_copies_and_detach():
    x = _x()
    y = x.conj()
    d = y.detach()
    assert d.is_conj() and d.data_ptr() == x.data_ptr()
    c = copy.deepcopy(y)
    assert not c.is_conj()
    np.testing.assert_array_equal(c.numpy(), _X.conj())


def test_write_beside_a_nan_reaches_the_base():
    x = ember.tensor(np.array([complex(np.nan, 1.0), complex(2.0, np.nan)], dtype=np.complex64))
    y = x.conj()
    y.add_(1j)                  # the NaN parts stay NaN; the other parts change
    got = x.numpy()
    assert np.isnan(got[0].real) and got[0].imag == 0
    assert got[1].real == 2 and np.isnan(got[1].imag)


def test_inplace_view_ops_that_change_nothing_keep_the_memory():
    x = _x()
    y = x.conj()
    y.squeeze_()                # no dim of size 1: the same view
    y.mul_(1j)
    np.testing.assert_allclose(x.numpy(), (_X.conj() * 1j).conj())
    assert y.is_conj() and y.data_ptr() == x.data_ptr()


def test_resize_and_share_memory_keep_the_bit_and_the_memory():
    x = _x()
    y = x.conj()
    y.resize_(4)
    assert y.is_conj() and y.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(y.resolve_conj().numpy(), _X.conj().reshape(-1)[:4])
    x = _x()
    y = x.conj()
    y.share_memory_()
    assert x.is_shared() and y.data_ptr() == x.data_ptr()
    y.add_(1j)
    np.testing.assert_array_equal(x.numpy(), _X - 1j)


def test_dtype_view_of_a_conj_view_refuses():
    y = _x().conj()
    with pytest.raises(RuntimeError, match=r"^torch.Tensor.view is not supported for conjugate "
                                           r"view tensors when converting to a different dtype"):
        y.view(ember.float32)


def test_forward_mode_primals_read_the_conjugated_values():
    y = _x().to(ember.complex128).conj()
    ones = ember.ones(2, 3, dtype=ember.complex128)
    out, tangent = ember.func.jvp(lambda t: t * 2, (y,), (ones,))
    np.testing.assert_array_equal(out.numpy(), _X.conj() * 2)
    np.testing.assert_array_equal(tangent.numpy(), np.full((2, 3), 2))
    out, _ = ember.func.linearize(lambda t: t * 2, y)
    np.testing.assert_array_equal(out.numpy(), _X.conj() * 2)
    assert y.is_conj()
    np.testing.assert_array_equal(y.resolve_conj().numpy(), _X.conj())


def test_swap_tensors_moves_the_bit_and_the_memory():
    x = _x()
    y = x.conj()
    p = ember.tensor(np.full((2, 3), 5j, dtype=np.complex64))
    ember.utils.swap_tensors(y, p)
    assert p.is_conj() and not y.is_conj() and p.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(y.numpy(), np.full((2, 3), 5j))
    np.testing.assert_array_equal(p.resolve_conj().numpy(), _X.conj())


def test_setting_data_drops_the_bit():
    x = _x()
    y = x.conj()
    t = ember.ones(2, 3, dtype=ember.complex64)
    y.data = t
    t.add_(1j)
    assert not y.is_conj()
    np.testing.assert_array_equal(y.numpy(), np.full((2, 3), 1 + 1j))
    np.testing.assert_array_equal(x.numpy(), _X)


def test_set_keeps_the_bit_over_the_new_memory():
    y = _x().conj()
    s = ember.tensor(np.array([1j, 2 + 1j], dtype=np.complex64))
    y.set_(s)
    s.add_(1)
    assert y.is_conj() and y.data_ptr() == s.data_ptr()
    np.testing.assert_array_equal(y.resolve_conj().numpy(), [1 - 1j, 3 - 1j])


def test_as_strided_and_imag_of_a_conj_view():
    x = _x()
    y = x.conj()
    z = y.as_strided((2,), (2,))
    assert z.is_conj() and z.data_ptr() == x.data_ptr()
    z.mul_(2)
    want = _X.copy()
    want.reshape(-1)[[0, 2]] *= 2
    np.testing.assert_array_equal(x.numpy(), want)
    with ember.no_grad():
        np.testing.assert_array_equal(y.imag.resolve_neg().numpy(), -want.imag)
        np.testing.assert_array_equal(y[1].imag.resolve_neg().numpy(), -want[1].imag)


def test_repeated_reads_of_a_conj_view_reuse_one_array_until_a_write():
    x = _x()
    y = x.conj()
    first = y._data
    held = y._data                          # ``first`` is held: a fresh array, not it
    assert held is not first
    np.testing.assert_array_equal(held, _X.conj())
    del first, held
    last = weakref.ref(y._data)
    again = y._data
    assert again is last()                  # unheld: the same array again, no new copy
    del again
    x.add_(1)                               # a write into the base bumps the shared counter
    np.testing.assert_array_equal(y._data, (_X + 1).conj())
    y.mul_(2)                               # a write through the (reused) array reaches x
    np.testing.assert_array_equal(x.numpy(), (_X + 1) * 2)
    np.testing.assert_array_equal(y._data, ((_X + 1) * 2).conj())
    for i in range(2):                      # rows of a view read after writes through rows
        y[i].add_(1j)
    np.testing.assert_array_equal(x.numpy(), (_X + 1) * 2 - 1j)
    x[0, 0] = float("nan")
    y[0, 1] = 5                             # a write beside a NaN after a cached read
    want = (_X + 1) * 2 - 1j
    want[0, 0], want[0, 1] = complex("nan"), 5
    np.testing.assert_array_equal(x.numpy(), want)
    np.testing.assert_array_equal(y._data, want.conj())


def test_a_subclass_keeps_its_class_through_conj():
    seen = []

    class M(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return super().__torch_function__(func, types, args, kwargs or {})

    a = ember.tensor(_X.copy(), requires_grad=True)
    c = a.as_subclass(M).conj()
    assert type(c) is M and type(ember.conj(a.as_subclass(M))) is M
    np.testing.assert_array_equal(c.detach().numpy(), _X.conj())
    seen.clear()
    d = c * 2
    assert type(d) is M and seen                # the hook runs on ops of the result
    d.real.sum().backward()
    assert a.grad.is_conj()                     # taken over from conj's backward (PyTorch's)
    np.testing.assert_array_equal(a.grad.resolve_conj().numpy(),
                                  np.full(_X.shape, 2, np.complex64))


def test_leaf_grad_taken_over_from_conj_keeps_the_bit():
    a = ember.tensor(_X.astype(np.complex128), requires_grad=True)
    w = _X[::-1].astype(np.complex128)
    (a.conj() * ember.tensor(w)).abs().sum().backward()
    g = a.grad
    want = (w.conj() * np.sign(_X.conj() * w)).conj()      # d|conj(a) w| / d a, PyTorch's form
    assert g.is_conj()
    np.testing.assert_allclose(g.resolve_conj().numpy(), want, rtol=1e-12)
    (a.conj() * ember.tensor(w)).abs().sum().backward()    # accumulates in place, bit kept
    assert a.grad is g and g.is_conj()
    np.testing.assert_allclose(g.resolve_conj().numpy(), 2 * want, rtol=1e-12)
    a.grad = None
    a.conj().sum().abs().backward()     # an expanded gradient is copied: no bit
    assert not a.grad.is_conj()


def test_imag_of_a_conj_view_is_a_negative_view():
    x = _x()
    im = x.conj().imag
    assert im.is_neg() and not im.is_conj() and im[1].is_neg() and im.mT.is_neg()
    np.testing.assert_array_equal(im.resolve_neg().numpy(), -_X.imag)
    with pytest.raises(RuntimeError, match="negative bit set. Use tensor.resolve_neg"):
        im.numpy()
    im[0, 1] = 10                       # writes reach x, negated
    im[1].add_(1)
    want = _X.copy()
    want.imag[0, 1] = -10
    want.imag[1] -= 1
    np.testing.assert_array_equal(x.numpy(), want)
    x[0, 0] = 7 + 8j                    # and x's writes show through it
    assert im[0, 0].item() == -8.0
    r = im.resolve_neg()
    assert not r.is_neg() and (im + 1).is_neg() is False
    r.zero_()                           # a copy
    assert x[0, 0].item() == 7 + 8j


def test_imag_of_a_conj_view_under_autograd():
    a = ember.tensor(_X.astype(np.complex128), requires_grad=True)
    im = a.conj().imag
    assert im.is_neg() and type(im.grad_fn).__name__ == "SelectBackward0"
    w = np.arange(6.0).reshape(2, 3)
    (im * ember.tensor(w)).sum().backward()
    np.testing.assert_array_equal(a.grad.resolve_conj().numpy(), -1j * w)
