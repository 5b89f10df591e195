"""jacrev/jacfwd refuse complex inputs and outputs, and autograd.functional refuses complex
outputs where it differentiates scalars with no grad_outputs, with PyTorch's messages; the
paths PyTorch lets through keep their values (round 27, state-space programs)."""

import numpy as np
import pytest

import ember
from ember.autograd import functional as AF
from ember.func import hessian, jacfwd, jacrev

_IMPLICIT = "grad can be implicitly created only for real scalar outputs but got ember.complex64"


def _expect(msg):
    return pytest.raises(RuntimeError, match="^" + msg.replace("(", r"\(").replace(")", r"\)"))


@pytest.mark.parametrize("api, transform", [("jacrev", jacrev), ("jacfwd", jacfwd)])
def test_jacobians_refuse_complex(api, transform):
    with _expect(f"{api}: Expected all outputs to be real but received complex tensor at "
                 "flattened input idx: 1"):
        transform(lambda x: (x * 2, x * 1j))(ember.ones(2))
    # every positional argument is checked, whatever argnums selects
    with _expect(f"{api}: Expected all inputs to be real but received complex tensor at "
                 "flattened input idx: 1"):
        transform(lambda x, y: x * 2, argnums=0)(ember.ones(2), ember.ones(2, dtype=ember.cfloat))
    # aux may be complex
    jac, aux = transform(lambda x: (x * 2, x * 1j), has_aux=True)(ember.ones(2))
    np.testing.assert_array_equal(jac.numpy(), 2 * np.eye(2))
    np.testing.assert_array_equal(aux.numpy(), np.full(2, 1j))


def test_hessian_refuses_complex_input_at_jacfwd():
    with _expect("jacfwd: Expected all inputs to be real but received complex tensor at "
                 "flattened input idx: 0"):
        hessian(lambda x: x.abs().sum())(ember.ones(2, dtype=ember.cfloat))


@pytest.mark.parametrize("call", [
    lambda: AF.jacobian(lambda x: x * 1j, ember.ones(2)),
    lambda: AF.jacobian(lambda x: x * 1j, ember.ones(2), strict=True),
    lambda: AF.vjp(lambda x: (x * 1j).sum(), ember.ones(2)),
    lambda: AF.vhp(lambda x: (x * x).sum(), ember.ones(2, dtype=ember.cfloat),
                   ember.ones(2, dtype=ember.cfloat)),
    lambda: AF.hvp(lambda x: (x * x).sum(), ember.ones(2, dtype=ember.cfloat),
                   ember.ones(2, dtype=ember.cfloat)),
    lambda: AF.hessian(lambda x: (x * x).sum(), ember.ones(2, dtype=ember.cfloat)),
])
def test_functional_refuses_implicit_complex_grads(call):
    with _expect(_IMPLICIT):
        call()


def test_functional_complex_paths_that_pass():
    x = ember.ones(2)
    eye = np.eye(2)
    # forward-mode keeps the imaginary part; vectorize gives the real part's Jacobian (zero)
    fwd = AF.jacobian(lambda x: x * 1j, x, strategy="forward-mode", vectorize=True)
    np.testing.assert_array_equal(fwd.numpy(), 1j * eye)
    vec = AF.jacobian(lambda x: x * 1j, x, vectorize=True)
    np.testing.assert_array_equal(vec.numpy(), np.zeros((2, 2)))
    # outputs that do not require grad, and explicit v, are fine
    np.testing.assert_array_equal(
        AF.jacobian(lambda x: ember.zeros(2, dtype=ember.cfloat), x).numpy(), np.zeros((2, 2)))
    out, g = AF.vjp(lambda x: (x * 1j).sum(), x, ember.tensor(1 + 0j))
    assert complex(out) == 2j
    np.testing.assert_array_equal(g.numpy(), np.zeros(2))
    # a real output of a complex input: d(3 Re z)/dz as PyTorch reports it
    jac = AF.jacobian(lambda z: z.real * 3, ember.tensor([1 + 2j, 3j]))
    np.testing.assert_array_equal(jac.numpy(), 3 * eye)


def test_split_message_names_dim_as_given():
    with pytest.raises(RuntimeError, match=r"size at dimension -1\), but got split_sizes"):
        ember.ones(3, 3).split([1, 1], dim=-1)
    with pytest.raises(RuntimeError, match=r"size at dimension 1\), but got split_sizes"):
        ember.ones(3, 3).split([1, 1], dim=1)


def test_forward_mode_hessian_of_complex_inputs():
    """forward-over-reverse: complex inputs pass (the inner jacrev is not func.jacrev's real
    one), a complex output that depends on them raises as the reverse-mode one does."""
    z = ember.tensor([1 + 2j, -0.5 + 0.3j, 2 - 1j])
    f = lambda a: (a.abs() ** 2 * a.real).sum()                      # noqa: E731
    fwd = AF.hessian(f, z, vectorize=True, outer_jacobian_strategy="forward-mode")
    # d/dz of the real part's 3x^2 + y^2 gradient, as PyTorch reports it: 6x + 2iy
    np.testing.assert_allclose(fwd.detach().numpy(), np.diag([6 + 4j, -3 + 0.6j, 12 - 2j]),
                               rtol=1e-6)
    with _expect(_IMPLICIT):
        AF.hessian(lambda a: (a * a).sum(), z, vectorize=True,
                   outer_jacobian_strategy="forward-mode")
    const = AF.hessian(lambda a: ember.ones((), dtype=ember.cfloat), ember.ones(2),
                       vectorize=True, outer_jacobian_strategy="forward-mode")
    np.testing.assert_array_equal(const.numpy(), np.zeros((2, 2)))
