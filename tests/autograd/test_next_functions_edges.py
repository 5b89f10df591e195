"""A node lists no edge for inputs that are not differentiable by definition (indices, masks,
targets, running statistics), as PyTorch's do; differentiable inputs that need no gradient
keep ``(None, 0)``."""

import pytest

import ember
import ember.nn.functional as F


def _edges(t):
    return [(None if n is None else type(n).__name__, nr) for n, nr in t.grad_fn.next_functions]


ACC = ("AccumulateGrad", 0)


def test_index_and_mask_inputs_have_no_edge():
    x = ember.ones(3, 4, requires_grad=True)
    mask = ember.ones(3, 4, dtype=ember.bool)
    index = ember.zeros(3, 4, dtype=ember.long)
    assert _edges(ember.where(mask, x, ember.zeros(3, 4))) == [ACC, (None, 0)]
    assert _edges(x.gather(1, index)) == [ACC]
    assert _edges(x.index_select(0, ember.tensor([0, 2]))) == [ACC]
    assert _edges(x.scatter_add(1, index, x)) == [ACC, ACC]
    assert _edges(x.masked_select(mask)) == [ACC]


def test_targets_and_running_stats_have_no_edge():
    x = ember.ones(4, 3, requires_grad=True)
    assert _edges(F.nll_loss(x, ember.tensor([0, 1, 2, 0]))) == [ACC]
    assert _edges(F.embedding(ember.tensor([0, 2]), x)) == [ACC]
    w = ember.ones(3, requires_grad=True)
    out = F.batch_norm(x, ember.zeros(3), ember.ones(3), w, None, training=True)
    assert _edges(out) == [ACC, ACC, (None, 0)]


def test_numbers_of_scalar_overloads_have_no_edge():
    x = ember.tensor([1.0, -2.0], requires_grad=True)
    assert _edges(x.pow(2)) == [ACC] and _edges(x.clamp(0, 1)) == [ACC]
    assert _edges(x.clamp(min=ember.zeros(2))) == [ACC, (None, 0), (None, 0)]
    assert _edges(x.clamp_min(0)) == [ACC] and _edges(x.clamp_max(1.5)) == [ACC]
    assert type(x.clamp_min(ember.zeros(2)).grad_fn).__name__ == "ClampMinBackward1"
    assert _edges(x * 2) == [ACC, (None, 0)]        # mul keeps its wrapped number's edge
    y = ember.xlogy(2.0, x.abs())
    assert type(y.grad_fn).__name__ == "XlogyBackward1" and len(_edges(y)) == 1
    x.clamp(0, 1).mul(ember.tensor([3.0, 5.0])).sum().backward()
    assert x.grad.tolist() == [3.0, 0.0]


def test_gradients_still_reach_the_differentiable_inputs():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    src = ember.tensor([[10.0, 20.0]], requires_grad=True)
    x.scatter_add(0, ember.tensor([[1, 0]]), src).pow(2).sum().backward()
    assert x.grad.tolist() == [[2.0, 44.0], [26.0, 8.0]]
    assert src.grad.tolist() == [[26.0, 44.0]]


def test_node_call_and_post_hook_get_one_gradient_per_edge():
    x = ember.ones(3, requires_grad=True)
    y = x.gather(0, ember.tensor([0, 0, 2]))
    seen = []
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: seen.append(len(grad_inputs)))
    y.sum().backward(retain_graph=True)
    assert seen == [1] and x.grad.tolist() == [2.0, 0.0, 1.0]
    assert y.grad_fn(ember.ones(3)).tolist() == [2.0, 0.0, 1.0]


def test_custom_function_keeps_one_edge_per_tensor_argument():
    class Scale(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x, index, factor):
            return x * factor

        @staticmethod
        def backward(ctx, grad):
            return grad, None, None

    x = ember.ones(2, requires_grad=True)
    out = Scale.apply(x, ember.tensor([0, 1]), 2.0)
    assert _edges(out) == [ACC, (None, 0)]


def test_cross_entropy_class_targets_have_no_target_or_weight_edge():
    x = ember.tensor([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]], requires_grad=True)
    t = ember.tensor([2, 0])
    w = ember.tensor([1.0, 2.0, 3.0])
    loss = F.cross_entropy(x, t, weight=w, label_smoothing=0.2)
    row = ember.tensor([0.5, -1.0, 2.0], requires_grad=True)
    assert _edges(loss) == [ACC] and _edges(F.cross_entropy(row, t[0])) == [ACC]
    # probability targets may need gradients: they keep their edges
    p = ember.full((2, 3), 1 / 3, requires_grad=True)
    assert _edges(F.cross_entropy(x, p)) == [ACC, ACC, (None, 0)]
    grad_p, = ember.autograd.grad(F.cross_entropy(x, p, reduction="sum"), p)
    assert ember.allclose(grad_p, -x.log_softmax(1).detach())
    # a gradient of the gradient still reaches x through the pruned node
    g, = ember.autograd.grad(loss, x, create_graph=True)
    gg, = ember.autograd.grad(g.pow(2).sum(), x)
    assert gg.shape == (2, 3) and bool(gg.abs().sum() > 0)


def test_attention_mask_edge_only_for_a_float_mask():
    q = ember.linspace(-1, 1, 24).reshape(1, 2, 3, 4).requires_grad_()
    bool_mask = ember.tensor([[True, False, True]] * 3)
    out = F.scaled_dot_product_attention(q, q, q, attn_mask=bool_mask)
    assert _edges(out) == [ACC, ACC, ACC]
    assert _edges(F.scaled_dot_product_attention(q, q, q)) == [ACC, ACC, ACC]
    mask = ember.zeros(3, 3, requires_grad=True)
    out = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    assert type(out.grad_fn).__name__ == "UnsafeViewBackward0"     # PyTorch's math kernel
    assert _edges(out) == [ACC, ACC, ACC, ACC]
    out.pow(2).sum().backward()
    assert mask.grad.shape == (3, 3) and bool(mask.grad.abs().sum() > 0)


def test_fmod_remainder_div_overload_names():
    x = ember.tensor([1.5, -2.5], requires_grad=True)
    other = ember.tensor([0.7, 1.1])

    def name(t):
        return type(t.grad_fn).__name__
    assert [name(ember.fmod(x, other)), name(ember.fmod(x, 2))] == ["FmodBackward1",
                                                                      "FmodBackward0"]
    assert [name(x % other), name(x % 2)] == ["RemainderBackward1", "RemainderBackward0"]
    assert name(ember.div(x, other, rounding_mode="floor")) == "DivBackward2"
    assert name(x / other) == "DivBackward0"
    rmod = 2 % x
    assert name(rmod) == "NotImplemented" and _edges(rmod) == [ACC]
    with pytest.raises(RuntimeError, match="derivative for aten::remainder is not implemented"):
        rmod.sum().backward()
