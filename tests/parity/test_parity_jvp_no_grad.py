"""``no_grad`` inside forward-mode transforms, against PyTorch: tangents flow through it
(forward AD ignores grad mode) while reverse mode, outer transforms included, sees the region
and its tangent's computation as constants (NOTE [Tangents through no_grad])."""

import numpy as np
import pytest

import ember
from tests.parity._compare import as_array

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_X = np.array([0.5, 1.0, 2.0, -0.7])
_T = np.array([1.0, -0.5, 0.25, 2.0])
_W = np.array([[0.3, -0.2, 0.5, 0.1], [-0.4, 0.6, 0.2, -0.3]])


def _args(lib):
    return lib.tensor(_X), lib.tensor(_T)


def _sin_const(lib):
    def f(x):
        with lib.no_grad():
            y = x.sin() * 2
        return y
    return f


def _product(lib):
    def f(x):
        with lib.no_grad():
            e = x.exp()
        return x * e
    return f


def _jvp(lib):
    x, t = _args(lib)
    return lib.func.jvp(_product(lib), (x,), (t,))


def _jvp_alone(lib):
    x, t = _args(lib)
    return lib.func.jvp(_sin_const(lib), (x,), (t,))


def _jacfwd(lib):
    return (lib.func.jacfwd(_product(lib))(_args(lib)[0]),)


def _linearize(lib):
    x, t = _args(lib)
    out, jvp_fn = lib.func.linearize(_product(lib), x)
    return out, jvp_fn(t), jvp_fn(t * 3)


def _grad_of_jvp(lib):
    x, t = _args(lib)
    return (lib.func.grad(lambda x: lib.func.jvp(_product(lib), (x,), (t,))[1].sum())(x),)


def _backward_through_jvp(lib):
    x, t = _args(lib)
    x.requires_grad_()
    out, tangent = lib.func.jvp(_product(lib), (x,), (t,))
    (out.sum() + (tangent * tangent).sum()).backward()
    return out, tangent, x.grad, lib.tensor([out.requires_grad, tangent.requires_grad])


def _vmap_of_jvp(lib):
    x, t = _args(lib)
    xs, ts = lib.stack([x, x * 2]), lib.stack([t, -t])
    return lib.func.vmap(lambda a, b: lib.func.jvp(_product(lib), (a,), (b,)))(xs, ts)


def _jvp_of_grad(lib):
    x, t = _args(lib)

    def loss(x):
        with lib.no_grad():
            scale = x.cos()
        return (scale * x * x).sum()
    return lib.func.jvp(lib.func.grad(loss), (x,), (t,))


def _hessian(lib):
    def loss(x):
        with lib.no_grad():
            scale = x.cos()
        return (scale * x.sin() * x).sum()
    return (lib.func.hessian(loss)(_args(lib)[0]),)


def _nested_jvp(lib):
    x, t = _args(lib)
    inner = lambda x: lib.func.jvp(_product(lib), (x,), (t,))[1]     # noqa: E731
    return lib.func.jvp(inner, (x,), (t * 0.5,))


def _inplace(lib):
    x, t = _args(lib)
    x.requires_grad_()

    def f(x):
        y = x * x
        with lib.no_grad():
            y.mul_(3)
        return y
    out, tangent = lib.func.jvp(f, (x,), (t,))
    out.sum().backward()        # PyTorch's in-place call under no_grad left y's history
    return out, tangent, x.grad


def _module(lib):
    x, t = _args(lib)
    layer = lib.nn.Linear(4, 2).double()
    with lib.no_grad():
        layer.weight.copy_(lib.tensor(_W))
        layer.bias.fill_(0.1)

    def f(x):
        with lib.no_grad():
            s = lib.tanh(layer(x))
        return s.sum() * x + layer(x).sum()
    out, tangent = lib.func.jvp(f, (x,), (t,))
    return out, tangent, lib.tensor([out.requires_grad, tangent.requires_grad])


def _escaped(lib):
    x, t = _args(lib)
    kept = []

    def f(x):
        with lib.no_grad():
            kept.append(x.exp())
        return x * kept[-1]
    out, tangent = lib.func.jvp(f, (x,), (t,))
    return out, tangent, kept[0], lib.tensor([kept[0].requires_grad])


def _enable_grad_inside(lib):
    x, t = _args(lib)

    def f(x):
        with lib.no_grad():
            with lib.enable_grad():
                y = x.sin()
            z = y * x
        return z
    return lib.func.jvp(f, (x,), (t,))


_PROGRAMS = [_jvp, _jvp_alone, _jacfwd, _linearize, _grad_of_jvp, _backward_through_jvp,
             _vmap_of_jvp, _jvp_of_grad, _hessian, _nested_jvp, _inplace, _module, _escaped,
             _enable_grad_inside]


@pytest.mark.parametrize("program", _PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_tangents_through_no_grad_as_pytorch(program):
    ours, theirs = program(ember), program(torch)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(as_array(a), as_array(b), rtol=1e-12, atol=1e-14)


def test_inference_mode_inside_jvp_cuts_the_tangent():
    """PyTorch's forward AD leaves inference mode: the region's tangent is zero."""
    def program(lib):
        x, t = _args(lib)

        def f(x):
            with lib.inference_mode():
                y = x.sin() * 2
            return y + x
        return lib.func.jvp(f, (x,), (t,))
    for a, b in zip(program(ember), program(torch)):
        np.testing.assert_allclose(as_array(a), as_array(b), rtol=1e-12)
