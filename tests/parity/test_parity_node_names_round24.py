"""Graphs of round 24, pinned against PyTorch: F.linear's weight reaches its AccumulateGrad
through a TBackward0 node (PyTorch's addmm / mm reads ``weight.t()``), in forward graphs and in
the graphs of gradients taken with create_graph=True; and the calls PyTorch answers with their
input itself (a flatten of one dim, the conj of a real tensor, ``+x``) return it in ember too:
the same object, a leaf staying a leaf, no view node."""

import numpy as np
import pytest

import ember
from tests.parity._compare import assert_same_error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

ACC = "torch::autograd::AccumulateGrad"


def _path_to(root, leaf):
    """The node names from ``root`` down to ``leaf``'s AccumulateGrad (the first path found)."""
    def walk(node):
        if node is None:
            return None
        if node.name() == ACC:
            return [ACC] if node.variable is leaf else None
        for nxt, _ in node.next_functions:
            below = walk(nxt)
            if below is not None:
                return [node.name()] + below
        return None
    return walk(root.grad_fn)


def _tree(t, depth=4):
    def walk(node, d):
        if node is None or d > depth:
            return None
        return node.name(), sorted((walk(n, d + 1) for n, _ in node.next_functions), key=repr)
    return walk(t.grad_fn, 0)


def _linear_case(lib, x_shape, bias, wants):
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal(x_shape), dtype=lib.float32)
    w = lib.tensor(rng.standard_normal((5, x_shape[-1])), dtype=lib.float32)
    b = lib.tensor(rng.standard_normal(5), dtype=lib.float32) if bias else None
    for t, name in ((x, "x"), (w, "w"), (b, "b")):
        if t is not None and name in wants:
            t.requires_grad_()
    return x, w, b


SHAPES = [(4,), (3, 4), (2, 3, 4)]
WANTS = ["xwb", "x", "w", "wb"]


@pytest.mark.parametrize("wants", WANTS)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("x_shape", SHAPES, ids=lambda s: f"{len(s)}d")
def test_linear_weight_edge_goes_through_t(x_shape, bias, wants):
    def run(lib):
        x, w, b = _linear_case(lib, x_shape, bias, wants)
        y = lib.nn.functional.linear(x, w, b)
        if not y.requires_grad:
            return None
        names = {"root": y.grad_fn.name()}
        if len(x_shape) != 2:       # (see below)
            return names, _path_to(y, w)[-2:] if w.requires_grad else None
        for t, key in ((x, "x"), (w, "w"), (b, "b")):
            if t is not None and t.requires_grad:
                names[key] = _path_to(y, t)
        return names
    # with a 1-D or 3-D input PyTorch's graph also views or unsqueezes the input before its
    # addmm; ember's fused op has one node there, so only the weight's last edge is compared
    assert run(ember) == run(torch)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("x_shape", SHAPES, ids=lambda s: f"{len(s)}d")
def test_linear_gradients_through_the_t_node_are_torchs(x_shape, bias):
    def run(lib):
        x, w, b = _linear_case(lib, x_shape, bias, "xwb")
        y = lib.nn.functional.linear(x, w, b)
        (y * y).sum().backward()
        return [t.grad.numpy() for t in (x, w, b) if t is not None]
    for ours, theirs in zip(run(ember), run(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("x_shape", SHAPES, ids=lambda s: f"{len(s)}d")
def test_linear_double_backward_graph_and_values(x_shape):
    # the weight's gradient is t() of mm's gradient for mat2 = weight.t(): TBackward0 over
    # TBackward0 over MmBackward0, as PyTorch's; the input's reads mat2.t()
    def run(lib):
        x, w, _ = _linear_case(lib, x_shape, False, "xw")
        y = lib.nn.functional.linear(x, w)
        gx, gw = lib.autograd.grad(y.pow(2).sum(), (x, w), create_graph=True)
        second = lib.autograd.grad((gx.pow(2).sum() + gw.pow(2).sum()), (x, w))
        return _tree(gw, 3), _tree(gx, 2), gw.stride(), [s.numpy() for s in second]
    ours, theirs = run(ember), run(torch)
    assert ours[:3] == theirs[:3]
    for a, b in zip(ours[3], theirs[3]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_nn_linear_graph_and_accumulated_layout():
    def run(lib):
        lib.manual_seed(0)
        layer = lib.nn.Linear(6, 3)
        x = lib.ones(2, 6)
        y = layer(x)
        t_node = y.grad_fn.next_functions[-1][0]
        y.sum().backward(retain_graph=True)
        y.sum().backward()              # twice through the same t() node
        return (t_node.name(), t_node.next_functions[0][0].variable is layer.weight,
                layer.weight.grad.stride(), layer.weight.grad.tolist())
    assert run(ember) == run(torch)


def test_hooks_on_a_linear_weight_see_its_gradient():
    def run(lib):
        w = lib.ones(3, 2, requires_grad=True)
        seen = []
        w.register_hook(lambda g: seen.append(tuple(g.shape)))
        y = lib.nn.functional.linear(lib.arange(4.0).reshape(2, 2), w)
        (y * lib.arange(6.0).reshape(2, 3)).sum().backward()
        return seen, w.grad.tolist()
    assert run(ember) == run(torch)


# --- calls that return their input itself -----------------------------------------------------

RETURNING_INPUT = {
    "flatten_1d": ((4,), lambda x: x.flatten()),
    "flatten_1_of_2d": ((3, 4), lambda x: x.flatten(1)),
    "flatten_0_0": ((3, 4), lambda x: x.flatten(0, 0)),
    "flatten_neg": ((3, 4), lambda x: x.flatten(-1, -1)),
    "function_flatten": ((3, 4), lambda x: ember_or_torch(x).flatten(x, 1, -1)),
    "flatten_0d": ((), lambda x: x.flatten()),
    "flatten_two_dims": ((2, 3, 4), lambda x: x.flatten(1)),
    "conj_real": ((3,), lambda x: x.conj()),
    "function_conj_real": ((3,), lambda x: ember_or_torch(x).conj(x)),
    "conj_physical_real": ((3,), lambda x: x.conj_physical()),
    "positive": ((3,), lambda x: x.positive()),
    "unary_plus": ((3,), lambda x: +x),
    "resolve_conj": ((3,), lambda x: x.resolve_conj()),
    "contiguous": ((3,), lambda x: x.contiguous()),
    "to_same_dtype": ((3,), lambda x: x.to(x.dtype)),
    "type_as": ((3,), lambda x: x.type_as(x)),
    "view_as": ((3,), lambda x: x.view_as(x)),
    "reshape_same": ((3, 4), lambda x: x.reshape(3, 4)),
    "squeeze_nothing": ((3, 4), lambda x: x.squeeze()),
    "expand_as": ((3,), lambda x: x.expand_as(x)),
    "ellipsis": ((3,), lambda x: x[...]),
}


def ember_or_torch(x):
    return torch if isinstance(x, torch.Tensor) else ember


@pytest.mark.parametrize("case", RETURNING_INPUT)
@pytest.mark.parametrize("kind", ["plain", "leaf", "nonleaf"])
def test_calls_returning_their_input(case, kind):
    shape, fn = RETURNING_INPUT[case]

    def run(lib):
        x = lib.ones(shape)
        if kind != "plain":
            x.requires_grad_()
            if kind == "nonleaf":
                x = x * 2
        y = fn(x)
        return (y is x, y.is_leaf, y.grad_fn.name() if y.grad_fn is not None else None,
                y._base is not None, tuple(y.shape))
    assert run(ember) == run(torch)


def test_complex_conj_is_not_its_input():
    def run(lib):
        x = lib.tensor([1 + 2j, 3 - 1j], requires_grad=True)
        y = x.conj()
        return y is x, y.grad_fn.name(), y.tolist()
    assert run(ember) == run(torch)


@pytest.mark.parametrize("call", [
    lambda lib, x: x.flatten(3),
    lambda lib, x: x.flatten(-4, -4),
    lambda lib, x: x.flatten(1, 0),
    lambda lib, x: x.flatten("a"),
    lambda lib, x: (x > 0).positive(),
    lambda lib, x: +(x > 0),
], ids=["dim_too_big", "negative_too_small", "start_after_end", "not_a_dim", "bool_positive",
        "bool_unary_plus"])
def test_errors_are_kept_by_the_input_returning_path(call):
    assert_same_error(call, lambda lib: lib.ones(2, 3))


def test_conj_physical_with_out_writes_out():
    def run(lib):
        x = lib.arange(3.0)
        out = lib.zeros(3)
        y = lib.conj_physical(x, out=out)
        return y is out, y is x, out.tolist()
    assert run(ember) == run(torch)


def test_returned_input_shares_versions_and_in_place_changes():
    def run(lib):
        x = lib.ones(2, 3)
        y = x.flatten(1)
        y.add_(1)
        return x._version, y._version, x.tolist()
    assert run(ember) == run(torch)
