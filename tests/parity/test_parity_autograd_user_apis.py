"""Autograd user APIs against PyTorch: retain_grad across in-place ops, strict-mode messages
of autograd.functional with create_graph, custom Function argument rules and graph edges,
the reentrant checkpoint's refusal of autograd.grad."""

import pytest

import ember
from tests.parity._compare import error, first_line

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _retained(lib, write):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = x * 1
    b.retain_grad()
    write(b)
    (b * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
    return b.grad.tolist()


@pytest.mark.parametrize("write", [lambda b: b.mul_(2), lambda b: b[1:].mul_(2),
                                   lambda b: b.add_(1).exp_()])
def test_retain_grad_after_in_place(write):
    assert _retained(ember, write) == _retained(torch, write)


def _error(fn):
    """(error type, first message line), None when ``fn()`` returns."""
    return error(fn, message=first_line)


@pytest.mark.parametrize("call", [
    lambda lib: lib.autograd.functional.jacobian(lambda a: a * 2, lib.ones(2), strict=True,
                                                 create_graph=True),
    lambda lib: lib.autograd.functional.vjp(lambda a: a * 2, lib.ones(2), lib.ones(2),
                                            strict=True, create_graph=True),
    lambda lib: lib.autograd.functional.jvp(lambda a: a * 2, lib.ones(2), lib.ones(2),
                                            strict=True, create_graph=True),
    lambda lib: lib.autograd.functional.hessian(lambda a, b: (a ** 3).sum(),
                                                (lib.ones(2), lib.ones(2)), strict=True),
    lambda lib: lib.autograd.functional.hessian(lambda a: a.detach().sum(), lib.ones(2),
                                                strict=True),
    lambda lib: lib.autograd.functional.hessian(lambda a: (a ** 3).sum(), lib.ones(2),
                                                strict=True, create_graph=True),
])
def test_functional_strict_errors(call):
    assert _error(lambda: call(ember)) == _error(lambda: call(torch))


def _function_case(lib):
    class Mix(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, k, b):
            return a * k + b

        @staticmethod
        def backward(ctx, g):
            return g, g, g
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    out = Mix.apply(x, 2, x * 3)
    edges = [None if n is None else n.name() for n, _ in out.grad_fn.next_functions]
    return edges, _error(lambda: out.sum().backward())


def test_function_edges_and_gradient_for_a_non_tensor():
    assert _function_case(ember) == _function_case(torch)


def _reentrant_grad(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    out = lib.utils.checkpoint.checkpoint(lambda a: a.sin(), x, use_reentrant=True)
    return _error(lambda: lib.autograd.grad(out.sum(), x))


def test_reentrant_checkpoint_under_autograd_grad():
    assert _reentrant_grad(ember) == _reentrant_grad(torch)
