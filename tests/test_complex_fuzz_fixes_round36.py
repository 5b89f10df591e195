"""Fixes found by round 36's complex-tensor fuzzer
(tests/parity/test_parity_complex_fuzz_round36.py), checked against the values PyTorch 2.13
gives, without torch."""

import math
import warnings

import numpy as np
import pytest

import ember
from ember.ops.conversion import _neg_view


def test_view_as_complex_of_a_negative_view_keeps_the_bit_and_memory():
    base = ember.tensor([1.0, 2.0, 3.0, 4.0])
    neg = _neg_view(base)                       # PyTorch's torch._neg_view
    c = ember.view_as_complex(neg[:2])
    assert c.is_neg() and not c.is_conj() and c.dim() == 0
    assert c.item() == complex(-1, -2)
    r = ember.view_as_real(c)                   # a negative complex view views as real too
    assert r.is_neg() and r.tolist() == [-1.0, -2.0]
    c.mul_(2)                                   # writes through to base's memory
    assert base.tolist() == [2.0, 4.0, 3.0, 4.0]


def test_backward_through_imag_of_a_conjugate_0d_leaf():
    # was KeyError: numpy.complex128 (a 0-dim view negated to a NumPy scalar)
    x = ember.tensor(1 + 2j, dtype=ember.complex128, requires_grad=True)
    x.conj().imag.backward(gradient=ember.tensor(0.5, dtype=ember.float64))
    assert x.grad.item() == complex(-0.0, -0.5)


def test_fill_with_an_element_of_itself():
    x = ember.tensor([1, 2])
    assert x.fill_(x[0]).tolist() == [1, 1]     # the value is read first: no overlap error


def test_fill_with_a_complex_tensor_casts_unchecked():
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert ember.zeros(2, dtype=ember.int64).fill_(ember.tensor(1.5 + 2j)).tolist() == [1, 1]
        assert ember.zeros(2).fill_(ember.tensor(complex(1e300, 1))).tolist() == [math.inf] * 2
        assert ember.zeros(2, dtype=ember.float64).fill_(
            ember.tensor(complex(math.inf, math.nan))).tolist() == [math.inf] * 2
    with pytest.raises(RuntimeError, match="converted to type double without overflow"):
        ember.zeros(2, dtype=ember.float64).fill_(1.5 + 2j)    # a number is checked


def test_copy_from_an_element_of_a_conjugate_view_overlaps():
    y = ember.tensor([[1 + 1j, 2j], [3, 4]]).conj()
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        y.copy_(y.reshape(-1)[0])


def test_inner_node_names():
    w = ember.ones(2, dtype=ember.complex128, requires_grad=True)
    s = ember.tensor(2 + 0j, dtype=ember.complex128)
    assert type(ember.inner(w, s).grad_fn).__name__ == "MulBackward0"
    assert type(ember.inner(s, w).grad_fn).__name__ == "MulBackward0"
    assert type(ember.inner(w, w).grad_fn).__name__ == "ViewBackward0"


def test_matmul_of_an_unfoldable_batch_raises_bmm_errors():
    a = ember.ones(2, 4, 3).mT              # its batch does not fold into rows without a copy
    with pytest.raises(RuntimeError, match=r"batch2 tensor to be: \[2, 4\] but got: \[2, 3\]"):
        ember.matmul(a, ember.ones(3, 3))
    with pytest.raises(RuntimeError, match=r"batch2 tensor to be: \[2, 4\] but got: \[2, 3\]"):
        ember.matmul(a, ember.ones(3))
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        ember.matmul(a, ember.ones(4, dtype=ember.float64))
    with pytest.raises(NotImplementedError, match='"bmm" not implemented'):
        ember.matmul(a.bool(), ember.ones(4, dtype=ember.bool))
    with pytest.raises(RuntimeError, match=r"cannot be multiplied \(6x4 and 3x2\)"):
        ember.matmul(a.contiguous(), ember.ones(3, 2))      # folds: mm's error
    with pytest.raises(RuntimeError, match=r"cannot be multiplied \(6x4 and 3x2\)"):
        ember.matmul(a, ember.ones(3, 2, requires_grad=True))  # folds for b's gradient
    assert ember.matmul(a, ember.ones(4, 2)).shape == (2, 3, 2)


def test_tensordot_checks_dims_before_dtypes():
    with pytest.raises(RuntimeError, match="dims < ndim_a or ndim_b"):
        ember.tensordot(ember.ones(()), ember.ones(4, dtype=ember.complex128), dims=1)
    with pytest.raises(RuntimeError, match="same length"):
        ember.tensordot(ember.ones(2), ember.ones(2, dtype=ember.float64), dims=([0], [0, 1]))
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.tensordot(ember.ones(4), ember.ones(4, dtype=ember.complex128), dims=1)


def test_abs_into_a_complex_out_of_another_precision():
    z = ember.tensor([3 + 4j], dtype=ember.complex128)
    with pytest.raises(RuntimeError, match="Found dtype ComplexFloat but expected ComplexDouble"):
        ember.abs(z, out=ember.empty(0, dtype=ember.complex64))
    out = ember.empty(0, dtype=ember.complex128)
    assert ember.abs(z, out=out).tolist() == [5 + 0j]


def test_layouts_of_angle_abs_out_isreal_rsub():
    a = ember.tensor([[1 + 1j, 2j, 3], [3, 4, 5]], dtype=ember.complex128).t()   # (1, 3)
    assert ember.angle(a).stride() == (2, 1)            # complex: row-major
    assert ember.angle(a.real).stride() == (1, 3)
    assert ember.abs(a, out=ember.empty(0)).stride() == (2, 1)
    assert ember.abs(a, out=ember.empty(0, dtype=ember.complex128)).stride() == (1, 3)
    assert ember.abs(a).stride() == (1, 3)
    assert ember.isreal(a.real).stride() == (1, 3)      # ones laid out as the input
    bt = ember.tensor([[True, False, True], [False, False, True]]).t()
    assert ember.sign(bt).stride() == ember.sgn(bt).stride() == (1, 3)
    assert ember.signbit(bt).stride() == (1, 3) and not ember.signbit(bt).any()
    assert ember.sign(bt).tolist() == bt.tolist()
    b = ember.ones(3, 2, dtype=ember.complex128)
    assert ember.rsub(b, a).stride() == (1, 3)          # PyTorch's sub(other, input)
    assert ember.rsub(a, b).stride() == (2, 1)
    assert ember.rsub(a, b).tolist() == (b - a).tolist()


def test_inplace_refuses_the_shape_before_the_cast():
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        ember.ones(1, 4, 3).add_(ember.ones(4, dtype=ember.complex128))
    with pytest.raises(RuntimeError, match=r"doesn't match the broadcast shape \[4, 1, 3\]"):
        ember.ones(4, 1, 1, dtype=ember.bool).add_(ember.ones(1, 3, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Float"):
        ember.ones(4).add_(ember.ones(4, dtype=ember.complex64))


def test_complex_number_powers_as_pytorch_kernels():
    inf = math.inf
    z = ember.tensor([0j, complex(-0.0, 0), complex(0, -0.0), complex(inf, 0), -3 + 0j],
                     dtype=ember.complex128)
    r = (z ** -1).tolist()                   # reciprocal: inf+nanj at 0, 0 at inf
    assert all(c.real == inf and c.imag != c.imag for c in r[:3])
    assert r[3] == 0 and abs(r[4] - (-1 / 3)) < 1e-15
    sq = np.array((z ** 2).tolist()[:3])    # products: the signs of zeros multiplying gives
    assert np.signbit(sq.real).tolist() == [False, False, False]
    assert np.signbit(sq.imag).tolist() == [False, True, True]
    assert (z[:3] ** -2).tolist()[0].real == inf
    w = ember.tensor([1 + 1j, -0.5 + 2j], dtype=ember.complex128)
    for p in (2, 3, -2, -1, -0.5, 0.5, 2 + 0j):
        want = np.array([1 + 1j, -0.5 + 2j]) ** complex(p)
        np.testing.assert_allclose(np.array((w ** p).tolist()), want, rtol=1e-13)


def test_conjugate_view_written_in_place_keeps_its_conj_node():
    leaf = ember.tensor([[1 + 1j, 2j], [3, 4]], dtype=ember.complex128, requires_grad=True)
    z = ember.ones(2, 2, dtype=ember.complex128)
    v = z.conj()
    v.mul_(leaf)
    assert type(v.grad_fn).__name__ == "ConjBackward0" and v.is_conj()
    assert type(z.grad_fn).__name__ == "CopySlices"
    w = ember.ones(2, 2, dtype=ember.complex128).conj()[0]     # not a conjugate last
    w.mul_(leaf[0])
    assert type(w.grad_fn).__name__ == "AsStridedBackward0"
    v.real.sum().backward()
    np.testing.assert_allclose(np.array(leaf.grad.tolist()), np.ones((2, 2)))


# --- review (rg5): only copy_ reads a conjugate/negative view's memory for its overlap check;
# the other ops read such an operand as its values (PyTorch's fallback resolves it first)

def test_ops_other_than_copy_read_a_conjugate_operand_as_a_copy():
    z = ember.tensor([1 + 1j, 2 + 2j, 3 + 3j, 4 + 4j])
    z[1:].add_(z.conj()[:3])                    # was refused by the memory-reading check
    assert z.tolist() == [1 + 1j, 3 + 1j, 5 + 1j, 7 + 1j]
    z = ember.tensor([1 + 1j, 2 + 2j, 3 + 3j, 4 + 4j])
    z.conj()[1:].add_(z[:3])                    # a conjugate written: resolved as well
    assert z.tolist() == [1 + 1j, 3 + 1j, 5 + 1j, 7 + 1j]
    z = ember.tensor([1 + 1j, 2 + 2j, 3 + 3j, 4 + 4j])
    ember.add(z.conj()[:3], 1, out=z[1:])
    assert z.tolist() == [1 + 1j, 2 - 1j, 3 - 2j, 4 - 3j]
    z = ember.tensor([1 + 1j, 2 + 2j, 3 + 3j, 4 + 4j])
    z.index_copy_(0, ember.tensor([0, 1, 2, 3]), z.conj())     # (check_no_overlap's ops)
    assert z.tolist() == [1 - 1j, 2 - 2j, 3 - 3j, 4 - 4j]
    x = ember.tensor([1.0, 2.0, 3.0, 4.0])
    _neg_view(x)[1:].add_(x[:3])
    assert x.tolist() == [1.0, 1.0, 1.0, 1.0]


def test_copy_refuses_a_partly_overlapping_conjugate_or_negative_view():
    msg = "refer to a single memory location"
    for write in (lambda z: z[1:].copy_(z.conj()[:3]), lambda z: z.conj()[1:].copy_(z[:3]),
                  lambda z: z.conj()[1:].copy_(z.conj()[:3])):
        z = ember.tensor([1 + 1j, 2 + 2j, 3 + 3j, 4 + 4j])
        with pytest.raises(RuntimeError, match=msg):
            write(z)
        assert z.tolist() == [1 + 1j, 2 + 2j, 3 + 3j, 4 + 4j]
    x = ember.tensor([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(RuntimeError, match=msg):
        x[1:].copy_(_neg_view(x)[:3])
    z = ember.tensor([1 + 1j, 2 + 2j])
    z.copy_(z.conj())                           # the same elements: fine
    assert z.tolist() == [1 - 1j, 2 - 2j]
    z[:0].copy_(z.conj()[1:1])                  # empty: fine


def test_writes_through_a_negative_complex_view_reach_memory_and_gradients():
    x = ember.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    c = ember.view_as_complex(_neg_view(x.clone()).view(2, 2))
    c.mul_(ember.tensor([1j, 2]))
    ember.view_as_real(c).sum().backward()
    assert type(c.grad_fn).__name__ == "ViewAsComplexBackward0"
    assert x.grad.tolist() == [-1.0, 1.0, -2.0, -2.0]       # was [-1.0] * 4
    z = ember.tensor([1 + 2j, 3 + 4j])
    r = ember.view_as_real(_neg_view(z))
    assert r.is_neg() and r.resolve_neg().tolist() == [[-1.0, -2.0], [-3.0, -4.0]]
    assert not r.resolve_neg().is_neg()
    r.add_(1)
    assert z.tolist() == [complex(-0.0, 1), 2 + 3j] and z._version == 1


def test_a_negative_view_of_a_negative_view_is_the_memory():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    base = x.detach()
    n = _neg_view(_neg_view(base))              # was -x with the bit set
    assert not n.is_neg() and n.tolist() == [1.0, 2.0]
    n.add_(1)
    assert base.tolist() == [2.0, 3.0] and base._version == 1
    (_neg_view(_neg_view(x)) * ember.tensor([3.0, 4.0])).sum().backward()
    assert x.grad.tolist() == [3.0, 4.0]


def test_conjugate_and_negative_bits_together_keep_the_values():
    # (PyTorch sets both bits; ember's views carry one: the values, in memory of their own)
    z = ember.tensor([1 + 2j, 3 + 4j], requires_grad=True)
    w = ember.tensor([1j, 2])
    assert not _neg_view(z).conj().conj().is_conj()     # a second conj clears the bit
    for make in (lambda t: _neg_view(t).conj(), lambda t: _neg_view(t.conj())):
        c = make(z)
        assert c.tolist() == [-1 + 2j, -3 + 4j]             # was -z or conj(z)
        assert c.conj().tolist() == [-1 - 2j, -3 - 4j]
        z.grad = None
        (c * w).real.sum().backward()
        assert z.grad.tolist() == [-1j, -2]                 # was [1j, 2]
    # imag of a conjugate view: the gradient's conj bits cancel, as PyTorch's
    g = ember.autograd.grad(z.conj().imag, z, ember.tensor([1.0, 2.0]))[0]
    assert not g.is_conj() and g.tolist() == [-1j, -2j]
