"""Review of the tangents through no_grad (NOTE [Tangents through no_grad]), against PyTorch:
reverse mode after ``jvp`` sees the region as constant and in-place writes there as never
made, and results that reach the graph only through the region do not require grad."""

import numpy as np
import pytest

import ember
from tests.parity._compare import as_array, assert_same_error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_X = np.array([0.5, 1.0, 2.0, -0.7])
_T = np.array([1.0, -0.5, 0.25, 2.0])


def _args(lib, requires_grad=False):
    x = lib.tensor(_X)
    return x.requires_grad_(requires_grad), lib.tensor(_T)


def _square_then_writes(lib, *writes):
    def f(x):
        y = x * x
        with lib.no_grad():
            for write in writes:
                write(y)
        return y
    return f


def _two_writes_then_backward(lib):
    x, t = _args(lib, True)
    f = _square_then_writes(lib, lambda y: y.mul_(3), lambda y: y.add_(1))
    out, tangent = lib.func.jvp(f, (x,), (t,))
    out.sum().backward()            # the writes are not in y's history: d(x * x) = 2 x
    return out, tangent, x.grad


def _write_then_use_then_backward(lib):
    x, t = _args(lib, True)
    f = _square_then_writes(lib, lambda y: y.mul_(3))
    out, tangent = lib.func.jvp(lambda x: f(x) * 2 + x, (x,), (t,))
    out.sum().backward()
    return out, tangent, x.grad


def _write_then_use_under_grad(lib):
    x, t = _args(lib)
    f = _square_then_writes(lib, lambda y: y.mul_(3), lambda y: y.sub_(0.5))
    return (lib.func.grad(lambda x: lib.func.jvp(lambda x: f(x) * x, (x,), (t,))[0].sum())(x),)


def _write_in_jacfwd_of_grad(lib):
    f = _square_then_writes(lib, lambda y: y.mul_(3))
    return (lib.func.jacfwd(lib.func.grad(lambda x: (f(x) * x.sin()).sum()))(_args(lib)[0]),)


def _region_only_results(lib):
    x, t = _args(lib, True)

    def f(x):
        with lib.no_grad():
            e = x.exp()
        return e * 2, x * e
    out, tangent = lib.func.jvp(f, (x,), (t,))
    flags = [y.requires_grad for y in out + tangent]
    out[1].sum().backward()
    return *out, *tangent, x.grad, lib.tensor(flags)


def _slice_writes(lib):
    x, t = _args(lib, True)

    def f(x):
        y = x.sin() * x
        v = y[2:]
        with lib.no_grad():
            y[:2] = x[1:3] * 5
            v.mul_(x[:2])
        return y * x
    out, tangent = lib.func.jvp(f, (x,), (t,))
    out.sum().backward()
    return out, tangent, x.grad, lib.func.jacfwd(f)(x.detach())


_PROGRAMS = [_slice_writes, _two_writes_then_backward, _write_then_use_then_backward,
             _write_then_use_under_grad, _write_in_jacfwd_of_grad, _region_only_results]


@pytest.mark.parametrize("program", _PROGRAMS, ids=lambda p: p.__name__.strip("_"))
def test_reverse_mode_after_tangents_through_no_grad_as_pytorch(program):
    ours, theirs = program(ember), program(torch)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(as_array(a), as_array(b), rtol=1e-12, atol=1e-14)


def test_backward_of_a_result_made_only_from_the_region_raises_as_pytorch():
    def program(lib, x):
        def f(x):
            with lib.no_grad():
                e = x.exp()
            return e * 2
        out, _ = lib.func.jvp(f, (x,), (lib.tensor(_T),))
        out.sum().backward()
    assert_same_error(program, lambda lib: _args(lib, True)[0])
