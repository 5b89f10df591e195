"""Conjugate views inside vmap: ``is_conj`` sees the batched values' conjugate bit and
``resolve_conj`` materialises it, so ``view_as_real`` of the result works (values from NumPy)."""

import numpy as np

import ember


def _z(shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def test_conj_flags_under_vmap():
    seen = []

    def f(z):
        a = z.conj()
        seen.append((z.is_conj(), a.is_conj(), ember.is_conj(a), a.resolve_conj().is_conj()))
        return a.real
    ember.func.vmap(f)(ember.from_numpy(_z((3, 2))))
    assert seen == [(False, True, True, False)]


def test_view_as_real_of_resolved_conj_under_vmap():
    z = _z((4, 3))
    out = ember.func.vmap(lambda t: ember.view_as_real(t.conj().resolve_conj()))(
        ember.from_numpy(z))
    np.testing.assert_array_equal(out.numpy(), np.stack((z.real, -z.imag), axis=-1))


def test_resolve_conj_under_nested_vmap():
    z = _z((2, 3, 4), 1)
    f = ember.func.vmap(ember.func.vmap(lambda t: ember.view_as_real(t.conj().resolve_conj())),
                        in_dims=1)
    want = np.stack((z.real, -z.imag), axis=-1).transpose(1, 0, 2, 3)
    np.testing.assert_array_equal(f(ember.from_numpy(z)).numpy(), want)


def test_resolve_conj_outside_vmap_unchanged():
    t = ember.from_numpy(_z((3,)))
    assert t.resolve_conj() is t
    c = t.conj()
    assert c.is_conj() and not c.resolve_conj().is_conj()
    np.testing.assert_array_equal(c.resolve_conj().numpy(), np.conj(t.numpy()))


def test_jvp_through_resolved_conj_view_as_real():
    z, t = _z((3,), 2), _z((3,), 3)
    out, tangent = ember.func.jvp(lambda a: ember.view_as_real(a.conj().resolve_conj()),
                                  (ember.from_numpy(z),), (ember.from_numpy(t),))
    np.testing.assert_array_equal(out.numpy(), np.stack((z.real, -z.imag), axis=-1))
    np.testing.assert_array_equal(tangent.numpy(), np.stack((t.real, -t.imag), axis=-1))


def test_dual_resolve_conj_resolves_tangent():
    fa = ember.autograd.forward_ad
    z, t = _z((3,), 4), _z((3,), 5)
    with fa.dual_level():
        c = fa.make_dual(ember.from_numpy(z), ember.from_numpy(t)).conj().resolve_conj()
        tangent = fa.unpack_dual(c).tangent
        assert not tangent.is_conj()
        np.testing.assert_array_equal(fa.unpack_dual(ember.view_as_real(c)).tangent.numpy(),
                                      np.stack((t.real, -t.imag), axis=-1))
