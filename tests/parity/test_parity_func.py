"""ember.func and autograd.functional against torch.func and torch.autograd.functional: the
same programs run in both, values and error messages compared."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import func as efunc
from ember.autograd import functional as EAF
from tests.parity._compare import assert_close

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _pair(*shape, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape)
    return ember.tensor(x), torch.tensor(x)


def _close(ours, theirs):
    if isinstance(theirs, (tuple, list)):
        for a, b in zip(ours, theirs):
            _close(a, b)
        return
    if isinstance(theirs, dict):
        for k in theirs:
            _close(ours[k], theirs[k])
        return
    assert_close(ours, theirs, 1e-6, 1e-8)


def _program(lib, nnf):
    """Functions written once against either library."""
    def f(a, b):
        return ((a.sin() @ b).tanh().sum(0), (a * a).mean())

    def loss(w, x, t):
        return nnf.cross_entropy((x @ w).unsqueeze(0), t.unsqueeze(0))
    return f, loss


def test_transforms_agree_with_torch_func():
    (ea, ta), (eb, tb) = _pair(3, 4), _pair(4, 2, seed=1)
    ef, eloss = _program(ember, F)
    tf, tloss = _program(torch, torch.nn.functional)
    _close(efunc.jacrev(ef, argnums=(0, 1))(ea, eb), torch.func.jacrev(tf, argnums=(0, 1))(ta, tb))
    _close(efunc.jacfwd(ef, argnums=1)(ea, eb), torch.func.jacfwd(tf, argnums=1)(ta, tb))
    _close(efunc.hessian(lambda a: ef(a, eb)[1])(ea),
           torch.func.hessian(lambda a: tf(a, tb)[1])(ta))
    (ew, tw), (ex, tx) = _pair(4, 3, seed=2), _pair(5, 4, seed=3)
    et, tt = ember.tensor([0, 2, 1, 1, 0]), torch.tensor([0, 2, 1, 1, 0])
    _close(efunc.vmap(efunc.grad(eloss), in_dims=(None, 0, 0))(ew, ex, et),
           torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))(tw, tx, tt))
    _close(efunc.jvp(lambda a: ef(a, eb), (ea,), (ea.cos(),)),
           torch.func.jvp(lambda a: tf(a, tb), (ta,), (ta.cos(),)))


def test_autograd_functional_agrees():
    (ea, ta), (ev, tv) = _pair(3), _pair(3, seed=4)

    def cube(lib):
        return lambda a: (a ** 3).sum() + a.prod()
    _close(EAF.hessian(cube(ember), ea), torch.autograd.functional.hessian(cube(torch), ta))
    _close(EAF.vhp(cube(ember), ea, ev), torch.autograd.functional.vhp(cube(torch), ta, tv))
    _close(EAF.jvp(lambda a: a.exp(), ea, ev),
           torch.autograd.functional.jvp(lambda a: a.exp(), ta, tv))


CALLS = [
    lambda m, x: m.vmap(lambda a: a.sum().item())(x),
    lambda m, x: m.vmap(lambda a: a if a.sum() > 0 else -a)(x),
    lambda m, x: m.vmap(lambda a: a, in_dims=2)(x),
    lambda m, x: m.vmap(lambda a: 3)(x),
    lambda m, x: m.vmap(lambda a: a, out_dims=None)(x),
    lambda m, x: m.grad(lambda a: a * 2)(x),
    lambda m, x: m.grad(lambda a: a.sum(), argnums=1)(x),
    lambda m, x: m.grad(lambda a: a.sum(), has_aux=True)(x),
    lambda m, x: m.vmap(lambda a, b: a.add_(b), in_dims=(None, 0))(x[0].clone(), x),
    lambda m, x: m.jvp(lambda a: 3, (x,), (x,)),
]


@pytest.mark.parametrize("call", CALLS)
def test_errors_match(call):
    ex, tx = _pair(3, 4)
    with pytest.raises(Exception) as theirs:
        call(torch.func, tx)
    with pytest.raises(type(theirs.value)) as ours:
        call(efunc, ex)
    assert str(ours.value).replace("ember", "torch") == str(theirs.value)
