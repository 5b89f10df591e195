"""Complex ops beyond the OpInfo checks: gradients of the complex-only views, memory sharing,
and layouts the parity suite cannot build."""

import math

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck


def _complex(*shape):
    return ember.randn(shape, dtype=ember.complex128, requires_grad=True)


@pytest.mark.parametrize("make", [lambda: _complex(3), lambda: _complex(2, 3),
                                  lambda: ember.tensor(1 - 2j, dtype=ember.complex128,
                                                       requires_grad=True),
                                  lambda: _complex(4, 3).detach().t().requires_grad_()])
def test_view_as_real_gradients(make):
    z = make()
    assert gradcheck(ember.view_as_real, [z])
    assert gradgradcheck(ember.view_as_real, [z])
    assert gradcheck(lambda t: ember.view_as_complex(ember.view_as_real(t)) * 2, [z])


def test_view_as_real_gradient_from_a_misaligned_slice():
    # the gradient reaching view_as_real is a contiguous slice at an odd offset: it cannot
    # be viewed as complex in place, so it is copied first (torch 2.13 raises here)
    z = _complex(3)
    flat = ember.view_as_real(z).reshape(-1)
    (ember.cat([ember.zeros(1, dtype=ember.float64), flat])[1:] * ember.arange(6.)).sum() \
        .backward()
    assert z.grad.tolist() == [complex(0, 1), complex(2, 3), complex(4, 5)]


def test_views_share_memory_and_version():
    z = ember.tensor([1 + 2j, 3 - 4j])
    r = ember.view_as_real(z)
    assert r.shape == (2, 2) and r.dtype is ember.float32 and r.stride() == (2, 1)
    r[1, 1] = 7.0
    assert z.tolist() == [1 + 2j, 3 + 7j]
    assert z._version == r._version == 1
    c = ember.view_as_complex(r)
    c[0] = 5j
    assert z.tolist() == [5j, 3 + 7j] and r[0].tolist() == [0.0, 5.0]
    assert c._base is z and r._base is z


def test_view_as_complex_layouts():
    x = ember.arange(12.).reshape(3, 2, 2).transpose(0, 1)
    assert ember.view_as_complex(x).stride() == (1, 2)
    assert ember.view_as_complex(ember.zeros(0, 2)).shape == (0,)   # zero strides are fine
    assert ember.view_as_complex(ember.arange(10.)[2:].view(4, 2)).tolist() == [
        2 + 3j, 4 + 5j, 6 + 7j, 8 + 9j]
    with pytest.raises(RuntimeError, match="Tensor must have a storage_offset divisible by 2"):
        ember.view_as_complex(ember.zeros(8)[1:7].view(3, 2))


def test_in_place_through_a_real_view_reaches_the_gradient():
    x = _complex(3)
    z = x.clone()
    ember.view_as_real(z).mul_(2)
    z.abs().sum().backward()
    expected = 2 * np.asarray(x.detach()) / np.abs(np.asarray(x.detach()))
    assert np.allclose(np.asarray(x.grad), expected)


def test_angle_gradients():
    z = ember.tensor([1 + 1j, 0j, -2 + 0.5j], dtype=ember.complex128, requires_grad=True)
    ember.angle(z).sum().backward()
    # i / conj(z), and zero at the origin
    assert np.allclose(np.asarray(z.grad), [-0.5 + 0.5j, 0, 1j / (-2 - 0.5j)])
    x = ember.tensor([-1.0, 0.0, 2.0, math.nan], requires_grad=True)
    ember.angle(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_parts_are_assembled_without_nan():
    inf = math.inf
    z = ember.complex(ember.tensor([inf, 0.0]), ember.tensor([0.0, -inf]))
    assert z.tolist() == [complex(inf, 0), complex(0, -inf)]
    p = ember.polar(ember.tensor([inf]), ember.tensor([0.0]))
    assert p.real.item() == inf       # the imaginary part is inf * 0 = NaN, as in PyTorch


def test_isreal():
    assert ember.tensor([1 + 0j, 1j, -0j]).isreal().tolist() == [True, False, True]
    assert ember.isreal(ember.tensor([1, 2])).tolist() == [True, True]


def test_sign_of_complex_points_to_sgn():
    for call in (lambda z: ember.sign(z), lambda z: z.sign_()):
        with pytest.raises(NotImplementedError, match="^Unlike NumPy, torch.sign is not intended "
                                                      "to support complex numbers. Please use "
                                                      "torch.sgn instead.$"):
            call(ember.tensor([3 + 4j]))
    assert ember.sgn(ember.tensor([3j])).tolist() == [1j]


def test_real_and_imag_can_be_assigned():
    z = ember.tensor([1 + 2j, 3 + 4j])
    z.real = ember.tensor([9.0, 8.0])
    z.imag = 0
    assert z.tolist() == [9 + 0j, 8 + 0j]
    x = ember.tensor([1.0, 2.0])
    x.real = ember.tensor([5.0, 6.0])
    assert x.tolist() == [5.0, 6.0]
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with "
                                           "non-complex dtypes"):
        x.imag = ember.tensor([1.0, 1.0])


def test_python_numbers_from_complex_tensors():
    assert float(ember.tensor(1.5 + 0j)) == 1.5 and int(ember.tensor(2.5 + 0j)) == 2
    with pytest.raises(RuntimeError, match="value cannot be converted to type double without "
                                           "overflow"):
        float(ember.tensor(1 + 2j))
    with pytest.raises(RuntimeError, match="value cannot be converted to type int64_t without "
                                           "overflow"):
        int(ember.tensor([1 + 2j]))


def test_discarding_the_imaginary_part_warns_once_at_the_caller(monkeypatch):
    import warnings
    from ember import _warn
    monkeypatch.setattr(_warn, "_WARNED_ONCE", set())
    z = ember.tensor([1 + 2j])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        z.float()
        z.to(ember.float64)
        ember.empty(1).copy_(z)
    assert [(w.filename, str(w.message)) for w in caught] == [
        (__file__, "Casting complex values to real discards the imaginary part")]


@pytest.mark.parametrize("space", [ember.linspace, ember.logspace])
def test_complex_endpoints_space_in_the_default_complex_dtype(space):
    assert space(0, 1j, 3).dtype is ember.complex64
    assert space(ember.tensor(0j), 1, 3).dtype is ember.complex64
    assert ember.linspace(0, 1 + 1j, 3).tolist() == [0j, 0.5 + 0.5j, 1 + 1j]
    with pytest.raises(RuntimeError, match=r"^torch\.\w+\(\): inferred dtype "
                                           r"c10::complex<float> can't be safely cast to "
                                           r"passed dtype Float$"):
        space(0, 1j, 3, dtype=ember.float32)


def test_reciprocal_of_complex_zero_is_infinite():
    # a division, as PyTorch's: inf+nanj (NumPy's complex reciprocal gives nan+nanj)
    for got in (ember.reciprocal(ember.tensor([0j, 2j])), ember.tensor([0j, 2j]).reciprocal_()):
        assert math.isinf(got[0].real.item()) and math.isnan(got[0].imag.item())
        assert got[1].item() == -0.5j


def test_real_of_a_real_tensor_is_the_tensor_itself():
    x = ember.ones(2, requires_grad=True)
    assert x.real is x
    z = ember.tensor([1 + 2j, 3 - 1j])
    assert z.real is not z and z.real.tolist() == [1.0, 3.0]


def test_complex_to_bool_is_nonzero_of_either_part():
    z = ember.tensor([0j, 1j, 2 + 0j, complex(0, math.nan)])
    assert z.bool().tolist() == [False, True, True, True]
    dst = ember.zeros(4, dtype=ember.bool)
    assert dst.copy_(z).tolist() == [False, True, True, True]


def test_complex_pow_of_a_half_is_sqrt():
    z = ember.tensor([-1 + 0j, -4 + 0j, 3 - 4j])
    assert ember.pow(z, 0.5).tolist() == [1j, 2j, 2 - 1j]
    assert (ember.tensor([1.0, -1.0]) ** (0.5 + 0j)).tolist() == [1 + 0j, 1j]


def test_grad_output_must_match_the_output_in_complexness():
    z = ember.tensor([1j, 2 + 0j], dtype=ember.complex128, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Mismatch in dtype: grad_output\[0\] has a dtype "
                                           r"of .*float64 and output\[0\] has a dtype of "
                                           r".*complex128"):
        z.exp().backward(ember.ones(2, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="both grad_output and output are required to have "
                                           "the same dtype"):
        ember.autograd.grad(z.abs(), z, ember.ones(2, dtype=ember.complex128))
    x = ember.tensor([1.0], requires_grad=True)
    x.exp().backward(ember.ones(1, dtype=ember.float64))   # real to real of any precision
    assert x.grad.dtype == ember.float32


def test_linear_gradients_conjugate_the_other_factor():
    x = ember.tensor([[1 + 0j, 2 - 1j], [1j, 1]], requires_grad=True)
    w = ember.tensor([[1 + 1j, 0.5], [2, 1j]], requires_grad=True)
    b = ember.tensor([0.5j, -1], requires_grad=True)
    ember.nn.functional.linear(x, w, b).real.sum().backward()
    # d/dw of real(sum(x w^T)) in PyTorch's convention: sum over rows of conj(x)
    assert w.grad.tolist() == [[1 - 1j, 3 + 1j], [1 - 1j, 3 + 1j]]
    assert x.grad.tolist() == [[3 - 1j, 0.5 - 1j], [3 - 1j, 0.5 - 1j]]
    assert b.grad.tolist() == [2 + 0j, 2 + 0j]
    z = _complex(3, 2)
    for args in ([z, _complex(4, 2), _complex(4)], [z, _complex(2)], [_complex(2), _complex(3, 2)]):
        assert gradcheck(ember.nn.functional.linear, args)
        assert gradgradcheck(ember.nn.functional.linear, args)


def test_sgn_divides_each_part_by_the_magnitude():
    inf = math.inf
    z = ember.tensor([complex(-2, -0.0), complex(2, inf), complex(inf, 0), 0j, 3 + 4j],
                     dtype=ember.complex128)
    got = ember.sgn(z).tolist()
    assert got[0] == -1
    assert got[1].real == 0 and math.isnan(got[1].imag)
    assert math.isnan(got[2].real) and got[2].imag == 0
    assert got[3:] == [0j, 0.6 + 0.8j]


def test_version_error_names_complex_types_as_pytorch():
    z = ember.tensor([1 + 2j, 3 - 1j], dtype=ember.complex128, requires_grad=True)
    y = z.exp()
    y.mul_(2)
    with pytest.raises(RuntimeError, match=r"inplace operation: \[CPUComplexDoubleType \[2\]\], "
                                           r"which is output 0 of Exp, is at version 1"):
        y.abs().sum().backward()


def test_polar_gradient_takes_the_sign_of_a_negative_abs():
    # PyTorch's d/d(abs) is sgn(out) = sign(abs) e^{i angle}; forward mode keeps e^{i angle}
    r = np.array([-1.5, 0.0, 2.0])
    t = np.array([0.3, -1.2, 2.5])
    a = ember.tensor(r, requires_grad=True)
    ember.view_as_real(ember.polar(a, ember.tensor(t))).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.sign(r) * (np.cos(t) + np.sin(t)))
    _, tangent = ember.func.jvp(lambda x: ember.polar(x, ember.tensor(t)), (ember.tensor(r),),
                                (ember.ones(3, dtype=ember.float64),))
    np.testing.assert_allclose(tangent.numpy(), np.exp(1j * t))


def test_polar_saves_only_its_result():
    # as PyTorch (PolarBackward0 saves result alone): abs and angle may be written in place
    # before backward; forward mode still reads them (jacfwd of jacrev, a constant angle)
    a = ember.tensor([1.5, -2.0], dtype=ember.float64, requires_grad=True)
    b = ember.tensor([0.3, 1.0], dtype=ember.float64, requires_grad=True)
    a2, b2 = a * 1, b * 1
    y = ember.polar(a2, b2)
    a2.add_(1)
    b2.mul_(3)
    ga, gb = ember.autograd.grad(ember.view_as_real(y).sum(), (a, b))
    r, t = np.array([1.5, -2.0]), np.array([0.3, 1.0])
    np.testing.assert_allclose(ga.numpy(), np.sign(r) * (np.cos(t) + np.sin(t)))
    np.testing.assert_allclose(gb.numpy(), r * (np.cos(t) - np.sin(t)))
    angle = ember.tensor(t)
    hess = ember.func.jacfwd(ember.func.jacrev(
        lambda x: ember.view_as_real(ember.polar(x, angle)).sin().sum()))(ember.tensor(r))
    c, s = np.cos(t), np.sin(t)
    # (PyTorch's value: its abs gradient runs through sgn(result), which flips at abs < 0)
    want = -np.sign(r) * (c * c * np.sin(r * c) + s * s * np.sin(r * s))
    np.testing.assert_allclose(hess.numpy(), np.diag(want), atol=1e-12)
