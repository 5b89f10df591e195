"""jvp over reverse-mode transforms (vjp, grad, jacrev, hessian, under vmap) and which jvp
results require grad (tangents that do, the caller's no_grad), against PyTorch."""

import numpy as np
import pytest

import ember
from tests.parity._compare import as_array

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_A = np.array([0.3, 1.0, -2.0], dtype=np.float32)
_B = np.array([0.5, -1.5, 0.7], dtype=np.float32)
_TA = np.array([1.0, -0.5, 2.0], dtype=np.float32)
_TB = np.array([-1.0, 0.25, 0.5], dtype=np.float32)
_M = np.array([[0.1, 0.2, 0.3], [-0.4, 0.5, -0.6], [1.1, -1.2, 0.9], [0.0, 2.0, -1.0]],
              dtype=np.float32)


def _f2(lib):
    return lambda x, y: (lib.sin(x) * y, (x * y).exp())


def _s2(lib):
    return lambda x, y: (lib.sin(x) * y.cos()).sum()


_CASES = {
    "jvp_vjp_sin": lambda lib, f, a, b, ta, tb, m: f.jvp(
        lambda x: f.vjp(lib.sin, x)[1](lib.ones(3))[0], (a,), (ta,)),
    "jvp_vjp_two_inputs": lambda lib, f, a, b, ta, tb, m: f.jvp(
        lambda x, y: f.vjp(_f2(lib), x, y)[1]((lib.ones(3), y)), (a, b), (ta, tb)),
    "jvp_vjp_has_aux": lambda lib, f, a, b, ta, tb, m: f.jvp(
        lambda x, y: (lambda o, fn, aux: (fn(lib.ones(3))[1], aux))(*f.vjp(
            lambda p, q: (p.sin() * q, (p * 2).cos()), x, y, has_aux=True)),
        (a, b), (ta, tb), has_aux=True),
    "jvp_vjp_output_and_pullback": lambda lib, f, a, b, ta, tb, m: f.jvp(
        lambda x: (lambda o, fn: (o, fn(o)[0]))(*f.vjp(lib.sin, x)), (a,), (ta,)),
    "jvp_grad": lambda lib, f, a, b, ta, tb, m: f.jvp(
        f.grad(_s2(lib), argnums=(0, 1)), (a, b), (ta, tb)),
    "jvp_jacrev": lambda lib, f, a, b, ta, tb, m: f.jvp(
        f.jacrev(_f2(lib), argnums=(0, 1)), (a, b), (ta, tb)),
    "jacfwd_jacrev": lambda lib, f, a, b, ta, tb, m: f.jacfwd(
        f.jacrev(_s2(lib), argnums=(0, 1)), argnums=(0, 1))(a, b),
    "jacfwd_jacrev_vector": lambda lib, f, a, b, ta, tb, m: f.jacfwd(
        f.jacrev(lambda x: lib.sin(x) * x.sum()))(a),
    "hessian": lambda lib, f, a, b, ta, tb, m: f.hessian(_s2(lib), argnums=(0, 1))(a, b),
    "vmap_jvp_vjp": lambda lib, f, a, b, ta, tb, m: f.vmap(lambda x, t: f.jvp(
        lambda z, w: f.vjp(_f2(lib), z, w)[1]((lib.ones(3), w))[0], (x, b), (t, tb)))(m, m * 2),
    "jvp_vmap_vjp": lambda lib, f, a, b, ta, tb, m: f.jvp(lambda x: f.vmap(
        lambda z: f.vjp(lib.sin, z)[1](lib.ones(3))[0])(x), (m,), (m,)),
    "jvp_vjp_vmapped_cotangents": lambda lib, f, a, b, ta, tb, m: f.jvp(
        lambda x: f.vmap(f.vjp(lib.sin, x)[1])(m)[0], (a,), (ta,)),
    "jvp_jvp_vjp": lambda lib, f, a, b, ta, tb, m: f.jvp(lambda x: f.jvp(
        lambda z: f.vjp(lib.sin, z)[1](lib.ones(3))[0], (x,), (ta,))[1], (a,), (tb,)),
    "grad_jvp_vjp": lambda lib, f, a, b, ta, tb, m: f.grad(lambda x: f.jvp(
        lambda z: f.vjp(lib.sin, z)[1](lib.ones(3))[0], (x,), (ta,))[1].sum())(a),
    "jvp_vjp_scalar_output": lambda lib, f, a, b, ta, tb, m: f.jvp(lambda x: f.vjp(
        lambda z: z.sin().sum(), x)[1](lib.tensor(2.0))[0], (a,), (ta,)),
}


def _flat(r):
    if isinstance(r, (tuple, list)):
        return [z for q in r for z in _flat(q)]
    return [r]


@pytest.mark.parametrize("name", sorted(_CASES))
def test_forward_over_reverse_matches(name):
    got, want = [
        _flat(_CASES[name](lib, lib.func, *[lib.tensor(v) for v in (_A, _B, _TA, _TB, _M)]))
        for lib in (ember, torch)]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == tuple(w.shape)
        np.testing.assert_allclose(as_array(g), w.detach().numpy(), rtol=1e-5, atol=1e-5)


def _flags(z):
    return z.requires_grad, z.is_leaf


_GRAD_CASES = {
    "input_requires_grad": lambda lib, x, t: lib.func.jvp(lib.sin, (x,), (t,)),
    "tangent_requires_grad": lambda lib, x, t: lib.func.jvp(lib.sin, (t,), (x,)),
    "one_tangent_of_two": lambda lib, x, t: lib.func.jvp(
        lambda a, b: (a.sin(), b.exp(), a * b), (t, t * 2), (x, t)),
    "tangent_through_vjp": lambda lib, x, t: lib.func.jvp(
        lambda a: lib.func.vjp(lib.sin, a)[1](lib.ones(3))[0], (t,), (x,)),
    "jvp_of_vjp_input": lambda lib, x, t: lib.func.jvp(
        lambda a: lib.func.vjp(lib.sin, a)[1](lib.ones(3))[0], (x,), (t,)),
}


@pytest.mark.parametrize("name", sorted(_GRAD_CASES))
@pytest.mark.parametrize("no_grad", [False, True])
def test_jvp_results_require_grad_as_torch(name, no_grad):
    results = []
    for lib in (ember, torch):
        x = lib.tensor(_A, requires_grad=True)
        t = lib.tensor(_TA)
        with lib.no_grad() if no_grad else lib.enable_grad():
            out = _flat(_GRAD_CASES[name](lib, x, t))
        flags = [_flags(z) for z in out]
        grads = None
        if not no_grad:
            live = [z for z in out if z.requires_grad]
            if live:
                sum(z.sum() for z in live).backward()
                grads = as_array(x.grad) if lib is ember else x.grad.numpy()
        results.append((flags, grads))
    (flags, grads), (want_flags, want_grads) = results
    assert flags == want_flags
    if want_grads is None:
        assert grads is None
    else:
        np.testing.assert_allclose(grads, want_grads, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("api", ["vjp", "grad", "jacrev", "jacfwd", "hessian"])
def test_transforms_under_no_grad_record_nothing(api):
    flags = []
    for lib in (ember, torch):
        x = lib.tensor(_A, requires_grad=True)
        f = lib.func
        with lib.no_grad():
            if api == "vjp":
                out, fn = f.vjp(lib.sin, x)
                res = [out, fn(lib.ones(3))[0]]
            elif api == "grad":
                res = [f.grad(lambda a: a.sin().sum())(x)]
            elif api == "hessian":
                res = [f.hessian(lambda a: a.sin().sum())(x)]
            else:
                res = [getattr(f, api)(lib.sin)(x)]
        flags.append([_flags(z) for z in res])
    assert flags[0] == flags[1]


@pytest.mark.parametrize("inner", ["grad", "jvp"])
def test_no_grad_inside_grad_hides_a_nested_transform(inner):
    got = []
    for lib in (ember, torch):
        f = lib.func

        def g(a, lib=lib, f=f):
            with lib.no_grad():
                if inner == "grad":
                    h = f.grad(lambda z: z.sin().sum())(a)
                else:
                    h = f.jvp(lib.sin, (a,), (lib.ones(3),))[1]
            return (h * a).sum()
        got.append(f.grad(g)(lib.tensor(_A)))
    np.testing.assert_allclose(as_array(got[0]), got[1].numpy(), rtol=1e-6)
