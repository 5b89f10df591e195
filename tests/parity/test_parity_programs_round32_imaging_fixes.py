"""What the computational imaging programs of round 32 (test_parity_programs_round32_imaging and
its _inverse and _mri siblings) found, pinned against PyTorch: inside ``vmap`` a conjugate view
reported ``is_conj()`` False and ``resolve_conj()`` handed it back unresolved, so fastMRI-style
``view_as_real(x.conj().resolve_conj())`` raised under vmap where PyTorch computes."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _complex(lib, shape, seed):
    rng = np.random.default_rng(seed)
    return lib.from_numpy((rng.standard_normal(shape) + 1j * rng.standard_normal(shape))
                          .astype(np.complex64))


def _flags_under_vmap(lib):
    seen = []

    def f(z):
        a = z.conj()
        b = a.resolve_conj()
        seen.append([a.is_conj(), lib.is_conj(a), b.is_conj(), z.is_conj(), z.is_neg()])
        return lib.view_as_real(b)
    out = lib.func.vmap(f)(_complex(lib, (4, 3), 0))
    return seen, out.numpy()


def test_conj_flags_and_resolve_under_vmap():
    got, want = _flags_under_vmap(ember), _flags_under_vmap(torch)
    assert got[0] == want[0]
    np.testing.assert_array_equal(got[1], want[1])


def _nested(lib):
    def f(z):
        return lib.view_as_real(z.conj().resolve_conj() * 1j)
    return lib.func.vmap(lib.func.vmap(f), in_dims=1)(_complex(lib, (2, 3, 4), 1)).numpy()


def test_resolve_conj_under_nested_vmap():
    np.testing.assert_allclose(_nested(ember), _nested(torch), rtol=1e-6, atol=1e-7)


def _grad_of_resolved(lib):
    seen = []

    def h(x):
        c = lib.complex(x, 2 * x).conj()
        seen.append([c.is_conj(), c.resolve_conj().is_conj()])
        return (lib.view_as_real(c.resolve_conj()) ** 2 * lib.tensor([1.0, 3.0])).sum()
    g = lib.func.grad(h)(lib.tensor([1.0, -0.5, 2.0]))
    per_row = lib.func.vmap(lambda z: lib.view_as_real(z.conj().resolve_conj()).sum())(
        _complex(lib, (3, 2), 2))
    return seen, g.numpy(), per_row.numpy()


def test_resolve_conj_under_grad_and_vmap_reduction():
    got, want = _grad_of_resolved(ember), _grad_of_resolved(torch)
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6, atol=1e-6)


def _forward_mode_resolved(lib):
    z = _complex(lib, (3,), 3)
    t = _complex(lib, (3,), 4)
    out, tangent = lib.func.jvp(lambda a: lib.view_as_real(a.conj().resolve_conj() * a),
                                (z,), (t,))
    fa = lib.autograd.forward_ad
    with fa.dual_level():
        c = fa.make_dual(z, t).conj().resolve_conj()
        flags = [fa.unpack_dual(c).tangent.is_conj()]
        primal, dual_tangent = fa.unpack_dual(lib.view_as_real(c))
    jac = lib.func.jacfwd(
        lambda x: lib.view_as_real(lib.complex(x, x * x).conj().resolve_conj()).sum(-1))(
        lib.tensor([0.5, -1.0, 2.0]))
    return flags, [v.numpy() for v in (out, tangent, primal, dual_tangent, jac)]


def test_resolve_conj_under_forward_mode():
    """view_as_complex's derivative views a conjugate grad as real (it resolves it first), and a
    dual tensor's resolve_conj resolves its tangent too."""
    got, want = _forward_mode_resolved(ember), _forward_mode_resolved(torch)
    assert got[0] == want[0]
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def _reverse_through_conj(lib):
    x = lib.from_numpy(np.arange(6, dtype=np.float32).reshape(3, 2)).requires_grad_()
    w = _complex(lib, (3,), 5)
    loss = (lib.view_as_complex(x).conj() * w).real.sum() + lib.view_as_complex(x).abs().sum()
    return lib.autograd.grad(loss, x)[0].numpy()


def test_view_as_complex_grad_of_conj():
    np.testing.assert_allclose(_reverse_through_conj(ember), _reverse_through_conj(torch),
                               rtol=1e-6)


def _conj_physical_warnings(lib):
    import warnings
    out = []
    for x in (lib.ones(2, 3), lib.ones(2, 3, dtype=lib.complex64)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = lib.func.vmap(lib.conj_physical)(x * (1 + 0 * x))
        names = {str(w.message).split(" (Triggered")[0] for w in caught}
        out.append((str(y.dtype).split(".")[-1], sorted(names)))
    return out


def test_conj_physical_fallback_warning_under_vmap():
    """PyTorch's conj_physical of a real tensor is the tensor (no fallback, no warning); of a
    complex one its vmap fallback names aten::_conj_physical."""
    assert _conj_physical_warnings(ember) == _conj_physical_warnings(torch)
