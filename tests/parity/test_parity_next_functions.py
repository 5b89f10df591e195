"""grad_fn.next_functions against PyTorch: no edge for inputs that are not differentiable by
definition (indices, masks, targets, running statistics)."""

import pytest

import ember

torch = pytest.importorskip("torch")


def _edges(t):
    fn = t.grad_fn
    return type(fn).__name__, [(None if n is None else type(n).__name__, nr)
                               for n, nr in fn.next_functions]


def _cases(T):
    F = T.nn.functional
    x = T.ones(3, 4, requires_grad=True)
    y = T.ones(3, 4, requires_grad=True)
    mask = T.tensor([[True, False, True, False]] * 3)
    index = T.tensor([[0, 1, 2, 0]] * 3)
    rows = T.tensor([0, 2])
    x4 = T.ones(1, 2, 3, 4, requires_grad=True)
    return {
        "where": lambda: T.where(mask, x, y),
        "masked_fill": lambda: x.masked_fill(mask, T.tensor(1.0, requires_grad=True)),
        "masked_scatter": lambda: x.masked_scatter(mask, y),
        "masked_select": lambda: x.masked_select(mask),
        "index_select": lambda: x.index_select(0, rows),
        "gather": lambda: x.gather(1, index),
        "scatter": lambda: x.scatter(1, index, y),
        "scatter_reduce": lambda: x.scatter_reduce(1, index, y, "amax"),
        "index_add": lambda: x.index_add(0, rows, T.ones(2, 4, requires_grad=True)),
        "index_copy": lambda: x.index_copy(0, rows, T.ones(2, 4)),
        "put": lambda: x.put(T.tensor([0, 5]), T.ones(2, requires_grad=True)),
        "take": lambda: x.take(T.tensor([0, 5])),
        "nll_loss": lambda: F.nll_loss(x, T.tensor([0, 1, 2]), weight=T.ones(4)),
        "embedding": lambda: F.embedding(T.tensor([0, 2]), x),
        "batch_norm": lambda: F.batch_norm(x, T.zeros(4), T.ones(4), y[0], None, training=True),
        "max_unpool": lambda: F.max_unpool2d(*F.max_pool2d(x[None], 2, return_indices=True), 2),
        "multi_margin": lambda: F.multi_margin_loss(x, T.tensor([0, 1, 2]), weight=T.ones(4)),
        "multilabel_margin": lambda: F.multilabel_margin_loss(x, index),
        "soft_margin": lambda: F.soft_margin_loss(x, T.ones(3, 4)),
        "bce": lambda: F.binary_cross_entropy(x.sigmoid(), y.detach() / 2, weight=T.ones(4)),
        "bce_logits": lambda: F.binary_cross_entropy_with_logits(
            x, T.ones(3, 4), weight=T.ones(4), pos_weight=T.ones(4)),
        # Scalar overloads: no edge for the number; a tensor needing no gradient keeps one
        "rsub": lambda: 2 - x,
        "sub": lambda: x - 2,
        "pow": lambda: x ** 2,
        "rpow": lambda: 2 ** x,
        "clamp": lambda: x.clamp(0, 1),
        "clamp_tensor": lambda: x.clamp(min=T.zeros(3, 4)),
        "clamp_min": lambda: x.clamp_min(0), "clamp_max": lambda: x.clamp_max(0.5),
        "clamp_min_tensor": lambda: x.clamp_min(T.zeros(3, 4)),
        "lerp": lambda: T.lerp(x, y, 0.5),
        "masked_fill_number": lambda: x.masked_fill(mask, 1.0),
        "index_fill": lambda: x.index_fill(0, rows, 1.0),
        "index_fill_tensor": lambda: x.index_fill(0, rows, T.tensor(1.0)),
        "scatter_value": lambda: x.scatter(1, index, 2.0),
        "fmod": lambda: T.fmod(x, 2),
        "remainder": lambda: x % 2,
        "xlogy": lambda: T.xlogy(x, 2.0),
        "xlogy_number_input": lambda: T.xlogy(2.0, x),
        "copysign": lambda: T.copysign(x, -1.0),
        "where_number": lambda: T.where(mask, x, 0.0),
        "mul_number": lambda: x * 2,
        "sdpa": lambda: F.scaled_dot_product_attention(x4, x4, x4),
        "sdpa_bool_mask": lambda: F.scaled_dot_product_attention(
            x4, x4, x4, attn_mask=T.ones(3, 3, dtype=T.bool)),
        "fmod_tensor": lambda: T.fmod(x, y), "fmod_0d": lambda: x.fmod(T.tensor(2.0)),
        "remainder_tensor": lambda: T.remainder(x, y), "remainder_0d": lambda: x % T.tensor(2.0),
        "rmod": lambda: 2 % x,
        "div_floor": lambda: T.div(x, y, rounding_mode="floor"),
        "div_trunc_number": lambda: x.div(2, rounding_mode="trunc"),
    }


@pytest.mark.parametrize("name", sorted(_cases(torch)))
def test_next_functions_match(name):
    assert _edges(_cases(ember)[name]()) == _edges(_cases(torch)[name]())


def _fused_cases(T):
    F = T.nn.functional
    x = T.ones(3, 4, requires_grad=True)
    return {        # class-index targets: no edge for the target and the weight
        "cross_entropy": lambda: F.cross_entropy(x, T.tensor([0, 1, 2]), weight=T.ones(4)),
        "cross_entropy_1d": lambda: F.cross_entropy(T.ones(4, requires_grad=True), T.tensor(1)),
        "cross_entropy_2d": lambda: F.cross_entropy(T.ones(1, 4, 2, requires_grad=True),
                                                    T.zeros(1, 2, dtype=T.long)),
    }


@pytest.mark.parametrize("name", sorted(_fused_cases(torch)))
def test_fused_op_nodes_have_torchs_edges(name):
    """ember computes these in one op, PyTorch in several: its node's edges lead to ember's
    inputs directly, so only the node's name and its edges' count are compared."""
    def outline(t):
        return type(t.grad_fn).__name__, len(t.grad_fn.next_functions)
    assert outline(_fused_cases(ember)[name]()) == outline(_fused_cases(torch)[name]())


def _chain(fn):
    """The node names of a graph, depth first, None for an absent edge."""
    if fn is None:
        return [None]
    return [type(fn).__name__] + [name for n, _ in fn.next_functions for name in _chain(n)]


REDUCTIONS = {"sum": lambda x: x.sum(1), "sum two dims": lambda x: x.sum((2, 0)),
              "sum negative dim": lambda x: x.sum(-1), "nansum": lambda x: x.nansum((0, -1)),
              "sum keepdim": lambda x: x.sum(1, keepdim=True)}


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_gradient_unsqueezes_each_reduced_dim(name):
    def chain(T):
        x = T.ones(2, 3, 4, requires_grad=True)
        y = REDUCTIONS[name](x)
        (g,) = T.autograd.grad(y, x, T.ones_like(y).requires_grad_(), create_graph=True)
        return _chain(g.grad_fn)
    assert chain(ember) == chain(torch)


GRADIENT_GRAPHS = {
    "prod dim": lambda x: x.prod(1), "prod keepdim": lambda x: x.prod(-1, keepdim=True),
    "prod": lambda x: x.prod(), "logsumexp": lambda x: x.logsumexp(1),
    "logsumexp two dims": lambda x: x.logsumexp((2, 0)),
    "logsumexp keepdim": lambda x: x.logsumexp(1, keepdim=True),
    "norm dim": lambda x: x.norm(dim=1), "norm": lambda x: x.norm(),
    "norm 3": lambda x: x.norm(3, dim=1), "norm 1.5": lambda x: x.norm(1.5, dim=(0, 2)),
    "norm 0.5": lambda x: x.norm(0.5, dim=1), "norm 1": lambda x: x.norm(1, dim=1),
    "norm inf": lambda x: x.norm(float("inf"), dim=1, keepdim=True),
    "var": lambda x: x.var(1), "var all": lambda x: x.var(),
    "amax": lambda x: x.amax(1), "amin keepdim": lambda x: x.amin(2, keepdim=True),
    "amax all": lambda x: x.amax(), "max dim": lambda x: x.max(1).values,
    "median dim": lambda x: x.median(0).values, "max": lambda x: x.max(),
    "mean": lambda x: x.mean(1), "mean all": lambda x: x.mean(),
    "pow number": lambda x: x.pow(3), "pow number base": lambda x: 2.0 ** x,
}


@pytest.mark.parametrize("name", list(GRADIENT_GRAPHS))
def test_reduction_and_pow_gradients_build_torchs_graph(name):
    """Under create_graph the gradient's graph has PyTorch's nodes: reduced dims unsqueezed
    (no ExpandBackward0) to broadcast, Scalar overloads (MulBackward1, DivBackward1) with one
    edge, value-selecting reductions through ScatterBackward0 or MaskedFillBackward1."""
    def graph(T):
        x = (T.arange(24.0).reshape(2, 3, 4) * 0.37 % 2.9 + 0.2).requires_grad_()
        y = GRADIENT_GRAPHS[name](x)
        v = (T.arange(float(y.numel())).reshape(y.shape) * 0.5 + 1).requires_grad_()
        (g,) = T.autograd.grad(y, x, v, create_graph=True)
        return _chain(g.grad_fn), g.detach().flatten().tolist()
    (chain, values), (want_chain, want_values) = graph(ember), graph(torch)
    assert chain == want_chain
    assert values == pytest.approx(want_values, rel=1e-5)


@pytest.mark.parametrize("exponent", ["tensor", "0-d tensor", "number base", "number"])
def test_pow_saves_its_result_only_for_a_tensor_exponent(exponent):
    """As PyTorch's, pow keeps its result for a tensor exponent: changing it in place before
    backward raises (a number exponent keeps the input instead)."""
    def backward_after_inplace(T):
        x = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = {"tensor": lambda: x.pow(T.full((3,), 2.0)), "0-d tensor": lambda: x ** T.tensor(2.0),
             "number base": lambda: 2.0 ** x, "number": lambda: x.pow(2.0)}[exponent]()
        y.add_(1)
        try:
            y.sum().backward()
        except RuntimeError as e:
            return str(e).replace("torch.", "ember.")
        return x.grad.tolist()
    assert backward_after_inplace(ember) == backward_after_inplace(torch)
