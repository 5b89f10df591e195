"""Autograd user APIs against PyTorch (round 15): non-tensor gradients and outputs, duplicate
``backward(inputs=...)``, the ``.grad`` setter and deleter, post-accumulate hooks that return
a value, multi-grad hooks' argument, Functions defining ``vjp``, the saved-output version
error of a Function, forward-mode Jacobian containers and calling a node."""

import pytest

import ember
from tests.parity._compare import ember_names, error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _error(fn):
    """(error type, message with torch's names read as ember's), None when ``fn()`` returns."""
    return error(fn, message=ember_names)


def _both(program):
    """``program(lib)``'s error under both libraries (they must agree and not be None)."""
    got, want = _error(lambda: program(ember)), _error(lambda: program(torch))
    assert want is not None
    assert got == want


@pytest.mark.parametrize("grads", [[1.0], [2], ["a"]])
def test_non_tensor_grad_outputs(grads):
    def program(lib):
        x = lib.ones(2, requires_grad=True)
        lib.autograd.backward([(x * 2).sum()], grads)
    _both(program)


def test_non_tensor_grad_outputs_of_grad():
    def program(lib):
        x = lib.ones(2, requires_grad=True)
        lib.autograd.grad(x * 2, x, [1.0])
    _both(program)


@pytest.mark.parametrize("output", [None, 3])
def test_non_tensor_output(output):
    def program(lib):
        x = lib.ones(2, requires_grad=True)
        lib.autograd.grad([output], x)
    _both(program)


def test_backward_inputs_listed_twice_accumulate_once():
    def program(lib):
        x = lib.tensor([2.0, 3.0], requires_grad=True)
        (x * x).sum().backward(inputs=[x, x])
        return x.grad.tolist()
    assert program(ember) == program(torch) == [4.0, 6.0]


def test_grad_assigned_to_itself():
    def program(lib):
        x = lib.ones(3, requires_grad=True)
        x.grad = x
    _both(program)


def test_del_grad():
    def program(lib):
        x = lib.ones(3, requires_grad=True)
        x.grad = lib.ones(3)
        del x.grad
        return x.grad
    assert program(ember) is None and program(torch) is None


@pytest.mark.parametrize("returned", [lambda t: t * 2, lambda t: 5])
def test_post_accumulate_hook_returning_a_value(returned):
    def program(lib):
        x = lib.ones(3, requires_grad=True)
        x.register_post_accumulate_grad_hook(returned)
        (x * 2).sum().backward()
    _both(program)


def test_multi_grad_hook_all_gets_a_list():
    def program(lib):
        x = lib.ones(2, requires_grad=True)
        y = lib.ones(1, requires_grad=True)
        seen = []
        lib.autograd.graph.register_multi_grad_hook((x, y), seen.append)
        (x * 2).sum().backward()
        (grads,) = seen
        return type(grads).__name__, grads[0].tolist(), grads[1]
    assert program(ember) == program(torch) == ("list", [2.0, 2.0], None)


def _function(lib, *, vjp, backward):
    attrs = {"forward": staticmethod(lambda ctx, x: x * 2)}
    if vjp:
        attrs["vjp"] = staticmethod(lambda ctx, g: g * 5)
    if backward:
        attrs["backward"] = staticmethod(lambda ctx, g: g * 5)
    return type("F", (lib.autograd.Function,), attrs)


def test_function_with_vjp_only():
    def program(lib):
        x = lib.ones(2, requires_grad=True)
        _function(lib, vjp=True, backward=False).apply(x).sum().backward()
        return x.grad.tolist()
    assert program(ember) == program(torch) == [5.0, 5.0]


def test_function_with_vjp_and_backward():
    def program(lib):
        x = lib.ones(2, requires_grad=True)
        _function(lib, vjp=True, backward=True).apply(x).sum().backward()
    _both(program)


def test_function_saved_output_modified_names_the_function():
    def program(lib):
        class Exp(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, g):
                (y,) = ctx.saved_tensors
                return g * y
        out = Exp.apply(lib.ones(2, requires_grad=True))
        out.add_(1)
        out.sum().backward()
    _both(program)
    assert "output 0 of Exp," in _error(lambda: program(ember))[1]


@pytest.mark.parametrize("out_tuple", [False, True])
@pytest.mark.parametrize("in_tuple", [False, True])
def test_forward_mode_jacobian_containers(in_tuple, out_tuple):
    def program(lib):
        x = lib.tensor([1.0, 2.0, 3.0])

        def func(*args):
            y = args[0] * args[-1]
            return (y, args[0]) if out_tuple else y
        jac = lib.autograd.functional.jacobian(func, (x, x) if in_tuple else x,
                                               vectorize=True, strategy="forward-mode")
        inner = jac[0] if out_tuple else jac
        return type(jac).__name__, type(inner).__name__
    assert program(ember) == program(torch)


def test_calling_a_node():
    def program(lib):
        x = lib.ones(2, requires_grad=True)
        w = lib.ones(2, requires_grad=True)
        single = x.exp().grad_fn(lib.ones(2))
        pair = (x * w).grad_fn(lib.ones(2))
        leaf = x.exp().grad_fn.next_functions[0][0](lib.ones(2))
        return (type(single).__name__, [round(v, 5) for v in single.tolist()], type(pair).__name__,
                len(pair), leaf)
    assert program(ember) == program(torch)



def test_saved_variables_is_a_deprecated_saved_tensors():
    def program(lib):
        class Twice(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_variables
                return g * x
        x = lib.tensor([1.0, 3.0], requires_grad=True)
        with pytest.warns(DeprecationWarning, match="'saved_variables' is deprecated; use "
                                                    "'saved_tensors'"):
            Twice.apply(x).sum().backward()
        return x.grad.tolist()
    assert program(ember) == program(torch) == [1.0, 3.0]


def test_forward_mode_jacobian_of_an_input_requiring_grad_requires_grad():
    def program(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        jac = lib.autograd.functional.jacobian(lambda a: a * a, x, vectorize=True,
                                               strategy="forward-mode")
        return jac.requires_grad, jac.tolist()
    assert program(ember) == program(torch) == (True, [[2.0, 0.0], [0.0, 4.0]])


@pytest.mark.parametrize("mode", ["all", "any"])
def test_multi_grad_hook_over_a_tensor_not_requiring_grad(mode):
    def program(lib):
        tensors = (lib.ones(2, requires_grad=True), lib.ones(2))
        return _error(lambda: lib.autograd.graph.register_multi_grad_hook(
            tensors, lambda grads: None, mode=mode))
    assert program(ember) == program(torch)
    assert (program(ember) is None) == (mode == "any")
