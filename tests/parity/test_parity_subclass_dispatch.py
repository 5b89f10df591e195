"""A Tensor subclass's ``__torch_function__`` against PyTorch's: for the same expressions it is
offered the same functions, by name and in the same order (``x.add(y)`` as ``Tensor.add``,
``x[0]`` as ``Tensor.__getitem__``, ``x.shape`` as the property's ``__get__``), and the
results have the same types and values. Skipped when PyTorch is not installed."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

EXPRESSIONS = [
    "s.add(p)", "lib.add(s, p)", "p.add(s)", "s + p", "p + s", "2 - s", "s - 2", "s * 2",
    "s // 2", "s == p", "s < 1", "-s", "s[0]", "s[:, 1]", "s.size()", "s.size(1)", "s.shape",
    "s.dim()", "s.T", "s.data", "s.grad", "s.tolist()", "s[0, 0].item()", "len(s)", "repr(s)",
    "s.numel()", "s.view(3, 2)", "s.view(-1)", "s.reshape(-1)", "s.to(lib.float64)",
    "s.float()", "s.sum()", "s.sum(0, keepdim=True)", "s.max(0)", "s.clone()", "s.detach()",
    "s.contiguous()", "s.expand_as(p)", "s.type_as(p)", "s.new_zeros(2)", "s.unbind()",
    "s.chunk(2)", "s.split(1)", "lib.cat([s, p])", "lib.stack([s, s])", "s.dtype",
    "s.device", "s.requires_grad", "s.is_leaf", "s.stride()", "s.numpy()", "bool(s[0, 0])",
    "s.is_floating_point()", "s.eq(p)", "s.t()", "s.transpose(0, 1)", "s.unsqueeze(0)",
    # hand-written functions are offered as themselves, not as the ops they are written with
    "lib.cat((p, s), dim=1)", "lib.max(s)", "lib.max(s, 1)", "lib.einsum('ij->j', s)",
    "lib.meshgrid(p[0], s[0], indexing='ij')", "lib.nn.functional.dropout(s, 0.5, False)",
    "lib.nn.functional.relu(s)", "lib.nn.functional.normalize(s)",
    "lib.nn.functional.layer_norm(s, (3,))", "lib.zeros_like(s)", "lib.vstack([p, s])",
    "lib.cov(s)", "lib.corrcoef(s)", "lib.numel(s)", "lib.is_floating_point(s)", "lib.detach(s)",
    "lib.diagflat(s[0])", "lib.narrow_copy(s, 1, 0, 2)", "lib.select_scatter(s, p[0], 0, 0)",
    "lib.split_with_sizes(s, [1, 2], 1)", "lib.float_power(s, 2)", "lib.pdist(s)",
    "lib.nn.functional.pdist(s)", "lib.nn.functional.bilinear(s, p, lib.ones(1, 3, 3))",
    "lib.transpose_copy(s, 0, 1)", "lib.view_copy(s, (3, 2))", "lib.adjoint(s)",
    "lib.is_same_size(s, p)", "lib.combinations(s[0])", "lib.frobenius_norm(s, (0, 1))",
    "lib.nuclear_norm(s)", "lib.qr(s)", "lib.unbind_copy(s)", "lib.kl_div(s, p)",
    "lib.max_pool1d(s, 2)", "lib.gradient(s[0])", "lib.nn.functional.lp_pool1d(s, 2, 1)",
    "lib.nn.functional.hinge_embedding_loss(s, p)", "lib.nn.functional.poisson_nll_loss(s, p)",
    "lib.nn.functional.triplet_margin_loss(s, p, p)",
    "lib.nn.functional.max_unpool1d(s, lib.tensor([[0, 1, 2], [0, 1, 2]]), 1)",
]


def _offered(lib, expression):
    """The names of the functions a logging subclass of ``lib`` is offered while
    ``expression`` runs, and its result's type name and values."""
    seen = []

    class Logged(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs)

    s = lib.arange(6.0).reshape(2, 3).as_subclass(Logged)
    p = lib.ones(2, 3)
    seen.clear()
    result = eval(expression, {"lib": lib, "s": s, "p": p})
    return seen, _summary(result, Logged)


def _summary(value, cls):
    if isinstance(value, (tuple, list)):
        return [type(value).__name__] + [_summary(v, cls) for v in value]
    kind = "subclass" if type(value) is cls else type(value).__name__
    if hasattr(value, "detach"):
        return kind, np.asarray(value.detach().tolist()).tolist()
    if isinstance(value, np.ndarray):
        return kind, value.tolist()
    if isinstance(value, str):
        return kind, value.replace("Logged(", "tensor(")
    return kind, value if isinstance(value, (int, float, bool, type(None))) else str(value)


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_subclass_is_offered_what_pytorch_offers(expression):
    got_seen, got = _offered(ember, expression)
    want_seen, want = _offered(torch, expression)
    assert got_seen == want_seen
    assert str(got).replace("ember", "torch") == str(want)


def test_in_place_op_of_a_plain_tensor_with_a_subclass_operand_keeps_its_type():
    for lib in (ember, torch):
        class Sub(lib.Tensor):
            pass
        p = lib.ones(2)
        out = p.add_(lib.ones(2).as_subclass(Sub))
        assert type(p) is lib.Tensor and type(out) is Sub
        assert out.tolist() == [2.0, 2.0]


def _mode_then_subclass(lib, expression):
    seen = []

    class Logged(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append("subclass " + func.__name__)
            return super().__torch_function__(func, types, args, kwargs)

    class Mode(lib.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append("mode " + func.__name__)
            return func(*args, **(kwargs or {}))

    s = lib.arange(6.0).reshape(2, 3).as_subclass(Logged)
    with Mode():
        result = eval(expression, {"lib": lib, "s": s})
    return seen, _summary(result, Logged)


@pytest.mark.parametrize("expression", ["s.size()", "s.add(1)", "s[0]", "s.shape",
                                        "lib.add(s, 1)", "s.to(lib.float64)", "s.T"])
def test_a_mode_handler_calling_on_hands_the_call_to_the_subclass(expression):
    import torch.overrides  # noqa: F401
    got = _mode_then_subclass(ember, expression)
    want = _mode_then_subclass(torch, expression)
    assert str(got).replace("ember", "torch") == str(want)


def _mode_sees(lib, expression):
    """What a logging torch function mode is offered (names and argument values) while
    ``expression`` runs on two plain tensors, and the result."""
    seen = []

    class Mode(lib.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append((func.__name__, [a.tolist() if isinstance(a, lib.Tensor) else a
                                         for a in args]))
            return func(*args, **(kwargs or {}))

    t, u = lib.tensor([1, 2]), lib.tensor([6, 3])
    with Mode():
        result = eval(expression, {"t": t, "u": u})
    return seen, result.tolist()


@pytest.mark.parametrize("expression", [
    "2 - t", "t - 2", "u / t", "u ** t", "t.__rsub__(u)", "t.__rtruediv__(u)", "t.__radd__(u)",
    "t.__rmul__(u)", "t.__rpow__(u)", "t.__rfloordiv__(u)", "t.__rmod__(u)", "t.__rand__(u)",
    "t.__rlshift__(u)", "t.__rmatmul__(u)", "t.__rsub__(2)"])
def test_a_mode_is_offered_reflected_operators_as_in_pytorch(expression):
    import torch.overrides  # noqa: F401
    got = _mode_sees(ember, expression)
    want = _mode_sees(torch, expression)
    assert str(got) == str(want)


def _unrelated(lib, expression):
    """What two unrelated subclasses, each refusing the other, are offered while
    ``expression`` runs (handler, function name, types), and its result or error."""
    seen = []

    def make(name):
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append((cls.__name__, func.__name__, [t.__name__ for t in types]))
            if any(t.__name__ in "AB" and t is not cls for t in types):
                return NotImplemented
            return lib.Tensor.__torch_function__.__func__(cls, func, types, args, kwargs)
        return type(name, (lib.Tensor,), {"__torch_function__": classmethod(__torch_function__)})

    A, B = make("A"), make("B")
    names = {"lib": lib, "a": lib.tensor([1, 2]).as_subclass(A),
             "b": lib.tensor([1, 3]).as_subclass(B), "p": lib.tensor([1, 2])}
    try:
        result = eval(expression, names)
    except TypeError as e:
        result = "TypeError: " + str(e).split(";")[0]
    return seen, (_summary(result, A) if not isinstance(result, str) else result)


@pytest.mark.parametrize("expression", [
    "a + b", "b + a", "a - b", "a * b", "a / b", "a // b", "a % b", "a @ b", "a ** b",
    "a & b", "a | b", "a << b", "a < b", "a >= b", "a == b", "b == a", "a != b", "-a",
    "a.__add__(b)", "a.__radd__(b)", "a.__eq__(b)", "a + p", "p + a", "2 - a", "p == a",
    "lib.add(a, b)", "a.add(b)", "lib.cat([a, b])"])
def test_unrelated_subclasses_meet_in_an_operator_as_in_pytorch(expression):
    got = _unrelated(ember, expression)
    want = _unrelated(torch, expression)
    assert str(got).replace("ember", "torch") == str(want)


def test_in_place_operator_of_unrelated_subclasses_falls_back_as_in_pytorch():
    code = "x = a\nx += b"
    results = []
    for lib in (ember, torch):
        seen = []
        A = type("A", (lib.Tensor,), {"__torch_function__": classmethod(
            lambda cls, f, t, a=(), k=None: seen.append(f.__name__) or NotImplemented)})
        B = type("B", (lib.Tensor,), {"__torch_function__": classmethod(
            lambda cls, f, t, a=(), k=None: seen.append(f.__name__) or NotImplemented)})
        with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \+=: 'A' and 'B'"):
            exec(code, {"a": lib.ones(2).as_subclass(A), "b": lib.ones(2).as_subclass(B)})
        results.append(seen)
    assert results[0] == results[1] == ["add_", "add_", "add", "add", "add", "add"]
