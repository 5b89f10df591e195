"""Round 26 engine against PyTorch: leaves that become ready together (``a + b``, stack, cat,
SDPA's q/k/v, linear's bias and input) accumulate in the order of PyTorch's ready heap, and a
multi-grad hook (mode "all") fires with the last gradient the backward computes of its
tensors, before that leaf's post-accumulate-grad hooks."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _leaves(lib, shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [lib.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]


def _order(lib, shapes, fn, post=False, multi=None):
    """The order in which the leaves' hooks (and post-accumulate hooks, and a multi-grad hook
    over the leaves ``multi`` names) run in ``fn(*leaves).sum().backward()``."""
    log = []
    leaves = _leaves(lib, shapes)
    names = "abcdefgh"
    if multi is not None:
        lib.autograd.graph.register_multi_grad_hook(
            [leaves[i] for i in multi],
            lambda grads: log.append(("multi", [None if g is None else round(float(g.sum()), 6)
                                                for g in grads])))
    for i, t in enumerate(leaves):
        t.register_hook(lambda g, i=i: log.append("hook " + names[i]))
        if post:
            t.register_post_accumulate_grad_hook(lambda p, i=i: log.append("post " + names[i]))
    fn(lib, *leaves).sum().backward()
    return log



CASES = {
    "add": ([(2, 3)] * 2, lambda lib, a, b: a + b),
    "sub": ([(2, 3)] * 2, lambda lib, a, b: a - b),
    "mul": ([(2, 3)] * 2, lambda lib, a, b: a * b),
    "div": ([(2, 3)] * 2, lambda lib, a, b: a / (b.abs() + 1)),
    "maximum": ([(2, 3)] * 2, lambda lib, a, b: lib.maximum(a, b)),
    "where": ([(2, 3)] * 2, lambda lib, a, b: lib.where(a > 0, a, b)),
    "stack": ([(2, 3)] * 3, lambda lib, a, b, c: lib.stack([a, b, c])),
    "cat": ([(2, 3)] * 3, lambda lib, a, b, c: lib.cat([a, b, c])),
    "addcmul": ([(2, 3)] * 3, lambda lib, a, b, c: lib.addcmul(a, b, c)),
    "a_plus_bc": ([(2, 3)] * 3, lambda lib, a, b, c: a + b * c),
    "chain": ([(2, 3)] * 3, lambda lib, a, b, c: (a * 2) * (b + 1) + c.exp()),
    "mm": ([(3, 3)] * 2, lambda lib, a, b: a @ b),
    "dot": ([(3,)] * 2, lambda lib, a, b: lib.dot(a, b)),
    "sdpa": ([(1, 2, 4, 8)] * 3,
             lambda lib, q, k, v: lib.nn.functional.scaled_dot_product_attention(q, k, v)),
    "linear": ([(2, 4), (3, 4), (3,)], lambda lib, x, w, b: lib.nn.functional.linear(x, w, b)),
    "linear_no_bias": ([(2, 4), (3, 4)], lambda lib, x, w: lib.nn.functional.linear(x, w)),
    "linear_chain": ([(2, 4), (3, 4), (3,), (5, 3), (5,)],
                     lambda lib, x, w, b, v, c: lib.nn.functional.linear(
                         lib.nn.functional.linear(x, w, b).tanh(), v, c)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_leaves_accumulate_in_pytorchs_order(name):
    shapes, fn = CASES[name]
    assert _order(ember, shapes, fn, post=True) == _order(torch, shapes, fn, post=True)


def test_leaves_accumulate_in_pytorchs_order_when_the_linear_graph_is_observed():
    def run(lib):
        log = []
        x, w, b = _leaves(lib, [(2, 4), (3, 4), (3,)])
        for name, t in (("x", x), ("w", w), ("b", b)):
            t.register_hook(lambda g, name=name: log.append(name))
        y = lib.nn.functional.linear(x, w, b)
        assert len(y.grad_fn.next_functions) == 3       # (routes ember's TBackward0 in)
        y.sum().backward()
        return log
    assert run(ember) == run(torch)


@pytest.mark.parametrize("multi", [(0, 1), (1, 0), (0, 1, 2), (2, 0)])
@pytest.mark.parametrize("name", ["mul", "a_plus_bc", "stack", "chain"])
def test_multi_grad_hook_fires_with_the_last_gradient(name, multi):
    shapes, fn = CASES[name]
    multi = tuple(i for i in multi if i < len(shapes))
    assert _order(ember, shapes, fn, post=True, multi=multi) == \
        _order(torch, shapes, fn, post=True, multi=multi)


def _multi_runs(lib):
    """A multi-grad hook over three leaves and over two non-leaves, through backwards that
    reach some of them, with inputs=, through autograd.grad, and one run inside a hook."""
    log = []

    def fn(grads):
        log.append(("multi", [None if g is None else round(float(g.sum()), 6) for g in grads]))
    a, b, c = (lib.ones(2, requires_grad=True) for _ in range(3))
    handle = lib.autograd.graph.register_multi_grad_hook([a, b, c], fn)
    a.register_hook(lambda g: log.append("hook a"))
    (a * 2 + b * 3).sum().backward()                     # c is not reached
    (a * 2 + b * 3 + c).sum().backward(inputs=[a])       # only a runs
    (a * 2 + b * 0 + c).sum().backward()
    handle.remove()
    x, y = a * 1, b * 2
    handle = lib.autograd.graph.register_multi_grad_hook([x, y], fn)
    x.register_hook(lambda g: log.append("hook x"))
    y.register_hook(lambda g: log.append("hook y"))
    (x * y).sum().backward(retain_graph=True)
    (x * 3 + y.detach()).sum().backward(retain_graph=True)  # y's node does not run
    lib.autograd.grad((x * y).sum(), [x, y], retain_graph=True)
    (x * 3 + y * 0).sum().backward(inputs=[a])           # y's node runs for nothing asked
    handle.remove()
    handle = lib.autograd.graph.register_multi_grad_hook([a, b], fn)

    def inner(g):                                        # a backward inside a backward
        log.append("inner")
        with lib.enable_grad():
            (b * 7).sum().backward()
    c.register_hook(inner)
    (a + c).sum().backward()
    handle.remove()
    handle = lib.autograd.graph.register_multi_grad_hook(
        [a, b], lambda g: log.append(("any", round(float(g.sum()), 6))), mode="any")
    (a * 2 + b * 3).sum().backward()
    (a * 5).sum().backward()
    return log


def test_multi_grad_hook_counts_what_each_backward_runs():
    assert _multi_runs(ember) == _multi_runs(torch)


def test_multi_grad_hook_refuses_leaves_under_autograd_grad():
    def run(lib):
        a, b = (lib.ones(2, requires_grad=True) for _ in range(2))
        lib.autograd.graph.register_multi_grad_hook([a, b], lambda grads: None)
        with pytest.raises(RuntimeError) as info:
            lib.autograd.grad((a * b).sum(), [a, b])
        return str(info.value)
    assert run(ember) == run(torch)


class _Callable:
    """A hook without ``__name__`` (PyTorch's messages name it '<unknown>')."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)


# what a node hook returns, given the gradients it may replace (a * b, b without grad: (g, None))
_NODE_HOOK_RETURNS = {
    "none": lambda gs: None,
    "same": lambda gs: gs,
    "doubled": lambda gs: tuple(None if g is None else g * 2 for g in gs),
    "dropped": lambda gs: (None,) * len(gs),
    "list": lambda gs: list(gs),
    "tensor": lambda gs: gs[0],
    "int": lambda gs: 3,
    "numpy_scalar": lambda gs: np.int64(1),
    "count": lambda gs: (*gs, gs[0]),
    "float_value": lambda gs: (1.0,) + gs[1:],
    "size": lambda gs: (gs[0][:1],) + gs[1:],
    "broadcastable": lambda gs: (gs[0].sum(0),) + gs[1:],
    "transposed": lambda gs: (gs[0].t(),) + gs[1:],
    "float64": lambda gs: (gs[0].double(),) + gs[1:],
    "float16": lambda gs: (gs[0].half(),) + gs[1:],
    "int64": lambda gs: (gs[0].long(),) + gs[1:],
    "uint8": lambda gs: (gs[0].byte(),) + gs[1:],
    "bool": lambda gs: (gs[0].bool(),) + gs[1:],
    "bfloat16": lambda gs: (gs[0].bfloat16(),) + gs[1:],
    "complex64": lambda gs: (gs[0].to(torch.complex64 if isinstance(gs[0], torch.Tensor)
                                      else ember.complex64),) + gs[1:],
    "type_and_size": lambda gs: (gs[0].double()[:1],) + gs[1:],
    "type_before_none": lambda gs: (gs[0].double(), gs[0]),
    "replaces_none": lambda gs: (gs[0], gs[0]),
    "int_for_none": lambda gs: (gs[0], 1),
}


def _node_hook_outcome(lib, kind, name, named):
    """``a.grad`` (its sum), or the error, after ``(a * b).sum().backward()`` with a node hook
    (``kind``: post or pre) that returns ``_NODE_HOOK_RETURNS[name]``."""
    a = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    b = lib.tensor([[2.0, 1.0, 0.5], [1.0, 3.0, 2.0]])
    y = a * b
    ret = _NODE_HOOK_RETURNS[name]

    def my_hook(*args):
        return ret(args[0])
    hook = my_hook if named else _Callable(my_hook)
    (y.grad_fn.register_hook if kind == "post" else y.grad_fn.register_prehook)(hook)
    try:
        y.sum().backward()
    except (TypeError, RuntimeError) as e:
        return type(e).__name__, str(e).replace("ember", "torch")
    return None if a.grad is None else float(a.grad.sum())


@pytest.mark.parametrize("named", [True, False])
@pytest.mark.parametrize("kind", ["post", "pre"])
@pytest.mark.parametrize("name", sorted(_NODE_HOOK_RETURNS))
def test_node_hook_values_checked_as_pytorch_does(name, kind, named):
    if kind == "pre" and name in ("type_before_none", "replaces_none", "int_for_none"):
        pytest.skip("the node has one output")
    got = _node_hook_outcome(ember, kind, name, named)
    assert got == _node_hook_outcome(torch, kind, name, named)
    expected = {"none": 9.5, "same": 9.5, "doubled": 19.0, "dropped": None}    # (sum of b)
    if name in expected:
        assert got == expected[name]
    else:
        assert isinstance(got, tuple)           # an error


@pytest.mark.parametrize("dtype", ["bfloat16", "bool", "complex64", "uint16", "float16",
                                   "int32"])
@pytest.mark.parametrize("named", [True, False])
def test_tensor_hook_type_change_message(dtype, named):
    def run(lib):
        def my_hook(g):
            return g.to(getattr(lib, dtype))
        a = lib.ones(2, 3, requires_grad=True)
        a.register_hook(my_hook if named else _Callable(my_hook))
        with pytest.raises(RuntimeError) as info:
            a.exp().sum().backward()
        return str(info.value).replace("ember", "torch")
    assert run(ember) == run(torch)


# ops whose node has integer outputs besides its values (GroupNorm's three are all float)
_MULTI_OUTPUT = {
    "max_dim": lambda lib, x: x.max(1)[0],
    "sort": lambda lib, x: x.sort(1)[0],
    "topk": lambda lib, x: x.topk(2, 1)[0],
    "kthvalue": lambda lib, x: x.kthvalue(2, 1)[0],
    "cummax": lambda lib, x: x.cummax(1)[0],
    "frexp": lambda lib, x: lib.frexp(x)[0],
    "max_pool2d": lambda lib, x: lib.nn.functional.max_pool2d(x, 2, return_indices=True)[0],
    "lu_factor": lambda lib, x: lib.linalg.lu_factor(x[0, :3])[0],
    "solve_ex": lambda lib, x: lib.linalg.solve_ex(x[0, :3, :3], x[0, :3, :1])[0],
    "group_norm": lambda lib, x: lib.nn.functional.group_norm(x, 3),
}


def _node_hook_grad_outputs(lib, name):
    """What a node's pre-hook and hook see of its outputs' gradients (the pre-hook doubles the
    first), and ``x.grad``'s sum."""
    rng = np.random.default_rng(3)
    x = lib.tensor(rng.standard_normal((4, 3, 4)), requires_grad=True)
    y = _MULTI_OUTPUT[name](lib, x)
    seen = []

    def describe(gs):
        return [None if g is None else (tuple(g.shape), round(float(g.sum()), 6)) for g in gs]

    def pre(go):
        seen.append(("pre", describe(go)))
        return (go[0] * 2,) + tuple(go[1:])
    y.grad_fn.register_prehook(pre)
    y.grad_fn.register_hook(lambda gi, go: seen.append(("post", len(gi), describe(go))))
    (y * lib.arange(y.numel(), dtype=y.dtype).reshape(y.shape)).sum().backward()
    return seen, round(float(x.grad.sum()), 6)


@pytest.mark.parametrize("name", sorted(_MULTI_OUTPUT))
def test_node_hooks_see_the_differentiable_outputs_gradients(name):
    assert _node_hook_grad_outputs(ember, name) == _node_hook_grad_outputs(torch, name)


def test_custom_function_node_hooks_see_every_output():
    def run(lib):
        class Three(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2, lib.ones(2, dtype=lib.int64), x * 3

            @staticmethod
            def backward(ctx, g, g_int, g3):
                return g * 2
        a = Three.apply(lib.ones(2, requires_grad=True))[0]
        seen = []
        a.grad_fn.register_hook(lambda gi, go: seen.append([g is None for g in go]))
        a.sum().backward()
        return seen
    assert run(ember) == run(torch) == [[False, True, True]]


# --- outputs PyTorch marks non-differentiable (differentiable_outputs) -----------------------

def _stat_outputs(lib, name):
    rng = np.random.default_rng(5)
    x = lib.tensor(rng.standard_normal((4, 3, 5)), requires_grad=True)
    w = lib.tensor(rng.standard_normal(5), requires_grad=True)
    if name == "layer_norm":
        return x, lib.native_layer_norm(x, (5,), w, None, 1e-5)
    if name == "batch_norm":
        return x, lib.native_batch_norm(x, w[:3], None, None, None, True, 0.1, 1e-5)
    if name == "lstsq":
        return x, lib.linalg.lstsq(x[0], x[1, :, :2], driver="gelsd")
    q = x[:2].reshape(2, 1, 3, 5)
    return x, (lib.nn.functional.scaled_dot_product_attention(q, q * 2, q * 3),)


def _stat_outcome(lib, name):
    """Which outputs require grad, and what the node's hooks see in ``y.sum().backward()``
    (the pre-hook doubles the first gradient), and ``x.grad``'s sum."""
    x, outs = _stat_outputs(lib, name)
    marks = [t.requires_grad and t.grad_fn is not None for t in outs]
    seen = []
    node = outs[0].grad_fn
    node.register_prehook(lambda go: (seen.append(("pre", len(go))),
                                      (go[0] * 2,) + tuple(go[1:]))[1])
    node.register_hook(lambda gi, go: seen.append(
        ("post", [None if g is None else round(float(g.sum()), 6) for g in go])))
    (outs[0] * outs[0]).sum().backward()
    return marks, seen, round(float(x.grad.sum()), 6)


@pytest.mark.parametrize("name", ["layer_norm", "batch_norm", "lstsq", "sdpa"])
def test_non_differentiable_outputs_as_pytorch_marks_them(name):
    assert _stat_outcome(ember, name) == _stat_outcome(torch, name)


def _second_order(lib, name):
    rng = np.random.default_rng(6)
    x = lib.tensor(rng.standard_normal((4, 3, 5)), requires_grad=True)
    w = lib.tensor(rng.standard_normal(5), requires_grad=True)
    if name == "layer_norm":
        y = lib.nn.functional.layer_norm(x, (5,), w)
    else:
        y = lib.nn.functional.batch_norm(x, None, None, w[:3], None, training=True)
    g, = lib.autograd.grad((y ** 3).sum(), x, create_graph=True)
    (g ** 2).sum().backward()
    return x.grad.detach().numpy(), w.grad.detach().numpy()


@pytest.mark.parametrize("name", ["layer_norm", "batch_norm"])
def test_double_backward_through_unmarked_statistics(name):
    for a, b in zip(_second_order(ember, name), _second_order(torch, name)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)
