"""Round 27: linear's recorded graph is PyTorch's, node for node and edge for edge: an
AddmmBackward0 of (bias, input, t(weight)) (an MmBackward0 of two edges without bias), between
views of a batch's rows and of its result; the leaves' order, node hooks' grad_inputs and
the gradients (also of second order) follow from it."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _tree(node, leaves):
    """A node's name and its edges' trees, leaves named by which input they accumulate."""
    if node is None:
        return None
    if not hasattr(node, "next_functions") or node.name().endswith("AccumulateGrad"):
        return next(name for name, t in leaves.items() if t is node.variable)
    return (node.name(), [_tree(n, leaves) for n, _ in node.next_functions])


# (input shape, input transposed, weight shape, bias shape or None, which inputs require grad)
CASES = {
    "2d_bias": ((3, 5), False, (7, 5), (7,), "xwb"),
    "2d": ((3, 5), False, (7, 5), None, "xw"),
    "3d_bias": ((2, 3, 5), False, (7, 5), (7,), "xwb"),
    "3d": ((2, 3, 5), False, (7, 5), None, "xw"),
    "4d_bias": ((2, 2, 3, 5), False, (7, 5), (7,), "xwb"),
    "1d_bias": ((5,), False, (7, 5), (7,), "xwb"),
    "1d": ((5,), False, (7, 5), None, "xw"),
    "3d_strided_bias": ((3, 2, 5), True, (7, 5), (7,), "xwb"),
    "3d_strided": ((3, 2, 5), True, (7, 5), None, "xw"),
    "2d_strided_bias": ((5, 3), True, (7, 5), (7,), "xwb"),
    "3d_matrix_bias": ((2, 3, 5), False, (7, 5), (3, 7), "xwb"),
    "1d_scalar_bias": ((5,), False, (7, 5), (), "xwb"),
    "2d_column_bias": ((3, 5), False, (7, 5), (3, 1), "xwb"),
    "2d_bias_no_input_grad": ((3, 5), False, (7, 5), (7,), "wb"),
    "2d_bias_no_bias_grad": ((3, 5), False, (7, 5), (7,), "xw"),
    "3d_bias_no_input_grad": ((2, 3, 5), False, (7, 5), (7,), "wb"),
    "3d_only_bias_grad": ((2, 3, 5), False, (7, 5), (7,), "b"),
    "3d_strided_only_bias_grad": ((3, 2, 5), True, (7, 5), (7,), "b"),
    "3d_strided_only_weight_grad": ((3, 2, 5), True, (7, 5), None, "w"),
    "vector_weight_2d": ((3, 5), False, (5,), None, "xw"),
    "vector_weight_1d": ((5,), False, (5,), None, "xw"),
    "vector_weight_3d": ((2, 3, 5), False, (5,), None, "xw"),
    # PyTorch's addmm takes a bias of one dim not 1 over the rows (a (6, 1) one per row)
    "3d_row_bias": ((2, 3, 5), False, (7, 5), (1, 7), "xwb"),
    "3d_bias_per_row": ((2, 3, 5), False, (7, 5), (6, 1), "xwb"),
    "3d_one_by_one_bias": ((2, 3, 5), False, (7, 5), (1, 1), "xwb"),
    "3d_scalar_bias": ((2, 3, 5), False, (7, 5), (), "xwb"),
    "vector_weight_1d_scalar_bias": ((5,), False, (5,), (), "xwb"),
    "vector_weight_3d_scalar_bias": ((2, 3, 5), False, (5,), (), "xwb"),
    "vector_weight_strided_bias": ((3, 2, 5), True, (5,), (3,), "xwb"),
    "3d_no_features": ((2, 3, 0), False, (7, 0), (7,), "xwb"),
    "3d_no_outputs": ((2, 3, 5), False, (0, 5), (0,), "xwb"),
    "3d_strided_no_features": ((3, 2, 0), True, (7, 0), None, "xw"),
}


def _inputs(lib, case, seed=0):
    x_shape, strided, w_shape, b_shape, grads = CASES[case]
    rng = np.random.default_rng(seed)
    leaves = {}

    def leaf(name, shape):
        t = lib.tensor(rng.standard_normal(shape), dtype=lib.float64,
                       requires_grad=name in grads)
        leaves[name] = t
        return t
    x = leaf("x", x_shape)
    if strided:                     # a transposed view: the batch is not contiguous
        x = x.transpose(0, 1)
    w = leaf("w", w_shape)
    b = leaf("b", b_shape) if b_shape is not None else None
    return x, w, b, leaves


@pytest.mark.parametrize("case", list(CASES))
def test_graph_gradients_and_leaf_order_match_pytorch(case):
    def run(lib):
        x, w, b, leaves = _inputs(lib, case)
        y = lib.nn.functional.linear(x, w, b)
        order = []
        for name, t in leaves.items():
            if t.requires_grad:
                t.register_hook(lambda g, name=name: order.append(name))
        tree = _tree(y.grad_fn, leaves)
        g = lib.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape)), dtype=lib.float64)
        y.backward(g)
        grads = {n: t.grad.numpy() for n, t in leaves.items() if t.requires_grad}
        return tree, order, y._is_view(), grads, y.detach().numpy()
    ours, theirs = run(ember), run(torch)
    assert ours[:3] == theirs[:3]
    np.testing.assert_allclose(ours[4], theirs[4], rtol=1e-12, atol=1e-12)
    assert ours[3].keys() == theirs[3].keys()
    for name in ours[3]:
        np.testing.assert_allclose(ours[3][name], theirs[3][name], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", ["2d_bias", "2d", "3d_bias", "3d", "1d_bias", "1d"])
def test_node_hooks_see_pytorchs_grad_inputs(case):
    def run(lib):
        x, w, b, _ = _inputs(lib, case)
        y = lib.nn.functional.linear(x, w, b)
        node = y.grad_fn
        if node.name() not in ("AddmmBackward0", "MmBackward0"):
            node = node.next_functions[0][0]
        seen = []
        node.register_hook(lambda gi, go: seen.extend(
            [None if g is None else g.detach().numpy().copy() for g in gi]))
        (y * 2).sum().backward()
        return node.name(), len(node.next_functions), seen
    ours, theirs = run(ember), run(torch)
    assert ours[:2] == theirs[:2]
    assert [None if g is None else g.shape for g in ours[2]] == \
        [None if g is None else g.shape for g in theirs[2]]
    for a, b in zip(ours[2], theirs[2]):
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", ["2d_bias", "3d_bias", "3d", "1d_bias"])
def test_double_backward_matches_pytorch(case):
    def run(lib):
        x, w, b, leaves = _inputs(lib, case)
        y = lib.nn.functional.linear(x, w, b)
        inputs = [t for t in leaves.values() if t.requires_grad]
        firsts = lib.autograd.grad(y.pow(2).sum(), inputs, create_graph=True)
        seconds = lib.autograd.grad(sum(g.pow(2).sum() for g in firsts), inputs)
        return [g.detach().numpy() for g in firsts + seconds]
    for a, b in zip(run(ember), run(torch), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", ["3d_bias", "3d", "1d"])
def test_in_place_after_linear_matches_pytorch(case):
    # a batch's result with a bias is a view of the addmm's: relu_ rebases it
    def run(lib):
        x, w, b, leaves = _inputs(lib, case)
        y = lib.nn.functional.linear(x, w, b)
        y.relu_()
        name = y.grad_fn.name()
        (y * 3).sum().backward()
        return name, {n: t.grad.numpy().tolist() for n, t in leaves.items() if t.requires_grad}
    assert run(ember) == run(torch)


@pytest.mark.parametrize("case", ["2d_bias", "3d_bias", "3d"])
def test_input_changed_in_place_is_refused_at_backward(case):
    def run(lib):
        x, w, b, leaves = _inputs(lib, case)
        x = x * 1                   # a non-leaf the weight's gradient reads (the saved rows)
        y = lib.nn.functional.linear(x, w, b)
        x.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as e:
            y.sum().backward()
        return str(e.value).split("hint")[0].replace("torch.", "").replace("ember.", "")
    assert run(ember) == run(torch)


def test_a_profiled_backward_names_pytorchs_nodes():
    def names(lib):
        x, w, b, _ = _inputs(lib, "3d_bias")
        y = lib.nn.functional.linear(x, w, b)
        with lib.profiler.profile() as prof:
            y.sum().backward()
        return sorted({e.name for e in prof.events() if "Backward0" in e.name})
    assert names(ember) == names(torch)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("x_shape", [(2, 3, 4), (4,), (3, 4)])
def test_nodes_run_in_pytorchs_order_around_shared_inputs(x_shape, bias):
    # q, k, v projections of one normalized input, and a residual: every node's turn (the
    # order gradients are summed in) is PyTorch's, also the nodes upstream of the linears
    def run(lib):
        rng = np.random.default_rng(1)
        x = lib.tensor(rng.standard_normal(x_shape), requires_grad=True)
        ws = [lib.tensor(rng.standard_normal((4, 4)), requires_grad=True) for _ in range(3)]
        bs = [lib.tensor(rng.standard_normal(4), requires_grad=True) if bias else None
              for _ in range(3)]
        h = lib.tanh(x) * 2
        q, k, v = (lib.nn.functional.linear(h, w, b) for w, b in zip(ws, bs))
        y = (q * k).exp() + v.sin() + h
        order, seen, todo = [], set(), [y.grad_fn]
        while todo:
            node = todo.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            node.register_prehook(lambda go, node=node: order.append(node.name()))
            todo.extend(n for n, _ in node.next_functions)
        y.sum().backward()
        return order, x.grad.numpy()
    ours, theirs = run(ember), run(torch)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)


# (input shape, weight shape, bias shape): calls PyTorch refuses, some with addmm's messages
REFUSED = [((3, 5), (5,), (3,)), ((2, 3, 5), (5,), (4,)), ((5,), (5,), (1,)),
           ((3, 5), (4, 5), (2, 3, 4)), ((2, 3, 5), (4, 5), (3, 1)), ((2, 3, 5), (4, 5), (3,)),
           ((5,), (4, 5), (3, 4)), ((5,), (5,), (3, 4)), ((2, 3, 5), (5,), (3, 4))]


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("shapes", REFUSED, ids=str)
def test_refused_bias_and_weight_shapes_raise_pytorchs_error(shapes, grad):
    def run(lib):
        x, w, b = (lib.ones(s, dtype=lib.float64, requires_grad=grad) for s in shapes)
        with pytest.raises(RuntimeError) as info:
            lib.nn.functional.linear(x, w, b)
        return str(info.value).replace("torch.", "ember.")
    assert run(ember) == run(torch)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("x_shape", [(2, 3, 4), (4,), (3, 4)])
def test_meta_tensors_name_the_last_node_as_pytorch(x_shape, bias):
    """On the meta device linear records its own node, named as PyTorch's graph's top."""
    def run(lib):
        w = lib.empty(5, 4, device="meta", requires_grad=True)
        b = lib.empty(5, device="meta", requires_grad=True) if bias else None
        y = lib.nn.functional.linear(lib.empty(*x_shape, device="meta"), w, b)
        return type(y.grad_fn).__name__, tuple(y.shape)
    assert run(ember) == run(torch)
